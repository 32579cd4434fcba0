#include "model/layers/decoder.h"

#include <algorithm>

namespace rl {

namespace {

size_t align256(size_t n) { return (n + 255) / 256 * 256; }

}  // namespace

// Workspace layout: [T, H] residual, normed, attention output, feed-forward output; [T, widest qkv row],
// [T, widest attention output]; [T, widest gate_up], [T, widest I]; the largest MoE workspace; the largest MLA
// workspace; [N, H] last hidden, [N, widest qkv row] (the last layer's query rows), [N, vocab] logits (act dtype
// and f32).
struct Decoder::Plan {
  size_t residual, normed, proj, ffn, qkv, attn, gate_up, inter, moe, mla, last, last_qkv, logits_act, logits_f32,
      gathered, total;
  int64_t qkv_row = 0, attn_width = 0, gu_width = 0, inter_width = 0;
};

Decoder::Plan Decoder::plan(int64_t max_tokens, int64_t max_logits) const {
  Plan p{};
  const size_t es = dtype_size(backend_->act_dtype());
  const size_t t = static_cast<size_t>(max_tokens), n = static_cast<size_t>(max_logits);
  const size_t h = static_cast<size_t>(config_.hidden_size), v = static_cast<size_t>(config_.vocab_size);
  size_t moe_bytes = 0, mla_bytes = 0;
  for (const DecoderBlock& b : blocks) {
    p.qkv_row = std::max(p.qkv_row, b.attn.layout.row());
    p.attn_width = std::max(p.attn_width, b.attn.layout.num_heads * b.attn.layout.head_dim);
    if (b.mlp) {
      p.gu_width = std::max(p.gu_width, b.mlp->gate_up.dim(0));
      p.inter_width = std::max(p.inter_width, b.mlp->inter);
    }
    if (b.moe) moe_bytes = std::max(moe_bytes, b.moe->workspace_bytes(max_tokens, es));
    if (b.mla) mla_bytes = std::max(mla_bytes, b.mla->workspace_bytes(max_tokens, es));
  }
  size_t off = 0;
  auto take = [&](size_t bytes) {
    size_t at = off;
    off += align256(bytes);
    return at;
  };
  p.residual = take(t * h * es);
  p.normed = take(t * h * es);
  p.proj = take(t * h * es);
  p.ffn = take(t * h * es);
  p.qkv = take(t * static_cast<size_t>(p.qkv_row) * es);
  p.attn = take(t * static_cast<size_t>(p.attn_width) * es);
  p.gate_up = take(t * static_cast<size_t>(p.gu_width) * es);
  p.inter = take(t * static_cast<size_t>(p.inter_width) * es);
  p.moe = take(moe_bytes);
  p.mla = take(mla_bytes);
  p.last = take(n * h * es);
  p.last_qkv = take(n * static_cast<size_t>(p.qkv_row) * es);
  p.logits_act = take(n * v * es);
  p.logits_f32 = take(n * v * 4);
  // Tensor parallelism: every rank's vocabulary slice of the logits, rank after rank ([N, n, vocab / N]).
  p.gathered = take(tp_ ? n * static_cast<size_t>(tp_->plan.padded_vocab) * es : 0);
  p.total = off;
  return p;
}

void Decoder::set_tensor_parallel(const TensorParallel* tp) {
  if (tp && tp->plan.tp_size > 1) {
    RL_CHECK(tp->comm != nullptr && tp->comm->size() == tp->plan.tp_size && tp->comm->rank() == tp->plan.rank);
    tp_ = *tp;
  } else {
    tp_.reset();
  }
}

void Decoder::all_reduce(const Tensor& x) const {
  const Status st = tp_->comm->all_reduce_sum(x);
  RL_CHECK_MSG(st.is_ok(), "tensor-parallel rank %d: %s", tp_->plan.rank, st.message().c_str());
}

void Decoder::finish_load(WeightLoader& w, const std::vector<float>& inv_freq) {
  w.finish();
  weight_bytes_ = w.bytes_loaded();
  weight_buffers_ = w.take_buffers();
  if (!inv_freq.empty()) {
    inv_freq_ = DeviceBuffer(backend_, inv_freq.size() * sizeof(float));
    backend_->upload(inv_freq_.data(), inv_freq.data(), inv_freq.size() * sizeof(float));
  }
  prepare_dense_stack();
}

void Decoder::prepare_dense_stack() {
  auto no = [&](std::string why) { stack_note_ = std::move(why); };
  if (tp_) return no("tensor parallelism");
  if (pos_embed.data || !inv_freq_.data()) return no("not a RoPE model");
  if (!mtp.empty()) return no("multi-token-prediction modules");
  if (blocks.empty()) return no("no layers");
  DenseStack s;
  const DecoderBlock& b0 = blocks.front();
  s.layout = b0.attn.layout;
  s.hidden = config_.hidden_size;
  s.scale = b0.attn.spec.scale;
  s.qk_eps = b0.attn.spec.norm_eps;
  s.inv_freq = static_cast<const float*>(inv_freq_.data());
  for (const DecoderBlock& b : blocks) {
    const AttentionSpec& a = b.attn.spec;
    if (b.mla || b.moe || !b.mlp) return no("a layer is not dense attention + MLP");
    if (!a.rope || a.window > 0 || a.sinks) return no("a layer's attention has a window, sinks or no RoPE");
    if (a.scale != s.scale || a.norm_eps != s.qk_eps || b.attn.layout.row() != s.layout.row() ||
        b.attn.layout.num_heads != s.layout.num_heads || b.attn.layout.head_dim != s.layout.head_dim) {
      return no("the layers' attention shapes differ");
    }
    const Mlp& m = *b.mlp;
    if (m.act.kind != Activation::kSiluGated || m.gate_up_bias.data || m.down_bias.data) {
      return no("an MLP is not SiLU-gated without biases");
    }
    if (s.inter == 0) s.inter = m.inter;
    if (m.inter != s.inter) return no("the layers' MLP widths differ");
    if (b.attn_norm.kind != Norm::Kind::kRms || b.ffn_norm.kind != Norm::Kind::kRms) return no("a norm is not RMSNorm");
    s.layers.push_back({.attn_norm = b.attn_norm.weight, .qkv = b.attn.qkv, .qkv_bias = b.attn.qkv_bias,
                        .q_norm = b.attn.q_norm, .k_norm = b.attn.k_norm, .o = b.attn.o, .o_bias = b.attn.o_bias,
                        .ffn_norm = b.ffn_norm.weight, .gate_up = m.gate_up, .down = m.down,
                        .attn_eps = b.attn_norm.params.eps, .ffn_eps = b.ffn_norm.params.eps});
  }
  std::string why = backend_->dense_stack_unsupported(s);
  if (!why.empty()) return no(why);
  DenseStack over_fp8 = s;  // the KV cache's dtype is chosen after the model loads: check both
  over_fp8.kv_fp8 = true;
  stack_fp8_ = backend_->dense_stack_unsupported(over_fp8).empty();
  // Zeroed once: the kernel leaves its counters at zero after every step.
  stack_scratch_ = DeviceBuffer(backend_, backend_->dense_stack_scratch_bytes(s), DeviceBuffer::Zeroed{});
  stack_ = std::move(s);
  stack_max_context_ = backend_->dense_stack_max_context();
  stack_note_.clear();
}

std::vector<KvLayerSpec> Decoder::kv_spec() const {
  std::vector<KvLayerSpec> out;
  for (const DecoderBlock& b : blocks) out.push_back(b.mla ? b.mla->kv_spec() : b.attn.kv_spec());
  return out;
}

uint64_t Decoder::workspace_bytes(int64_t max_num_tokens, int64_t max_num_logits) const {
  return plan(max_num_tokens, max_num_logits).total;
}

void Decoder::reserve(int64_t max_num_tokens, int64_t max_num_logits) {
  if (max_num_tokens <= max_tokens_ && max_num_logits <= max_logits_) return;
  max_tokens_ = std::max(max_tokens_, max_num_tokens);
  max_logits_ = std::max(max_logits_, max_num_logits);
  workspace_ = DeviceBuffer(backend_, plan(max_tokens_, max_logits_).total);
}

Tensor Decoder::forward(const ForwardBatch& b, std::span<const KvLayer> kv) {
  const int64_t t = b.num_tokens, h = config_.hidden_size, n = b.num_logits;
  RL_CHECK_MSG(t > 0 && t <= max_tokens_ && n <= max_logits_, "batch exceeds the reserved workspace");
  RL_CHECK(kv.size() == blocks.size());
  Backend& be = *backend_;
  const Plan p = plan(max_tokens_, max_logits_);
  char* ws = static_cast<char*>(workspace_.data());
  const DType adt = be.act_dtype();
  auto act = [&](size_t off, int64_t rows, int64_t cols) { return Tensor(ws + off, adt, {rows, cols}); };
  Tensor residual = act(p.residual, t, h), normed = act(p.normed, t, h), proj = act(p.proj, t, h);
  Tensor ffn = act(p.ffn, t, h);
  const float* inv_freq = static_cast<const float*>(inv_freq_.data());

  if (tp_) {  // vocab-parallel: each rank looks up its rows (zeros elsewhere), the sum is the whole lookup
    be.embedding_shard(b.input_ids, embed, tp_->plan.vocab_begin, residual);
    all_reduce(residual);
  } else {
    be.embedding(b.input_ids, embed, residual);
  }
  if (pos_embed.data) be.add_position_embedding(b.positions, pos_embed, residual);
  // The fused decode path (Backend::fuses_norm_linear): projections add straight into the residual stream and
  // RMS pre-norms fold into the projection after them, so a dense Llama-style layer runs no norm kernel. pending:
  // a layer output not yet added into residual (unfused path, MLA, MoE); the next norm adds it.
  // Not under tensor parallelism: a rank's o_proj / down_proj output is a partial sum, all-reduced before the add.
  // At prefill sizes a backend may still add bias-free projections into the residual stream
  // (Backend::fuses_linear_add): the norms then run plain.
  const bool fuse = !tp_ && be.fuses_norm_linear(t);
  const Tensor* pending = nullptr;
  auto pre_norm = [&](const Norm& norm) {
    if (pending) {
      norm.add_apply(be, residual, *pending, normed);
    } else {
      norm.apply(be, residual, normed);
    }
    pending = nullptr;
  };
  auto fused_input = [&](const Norm& norm) { return fuse && !pending && norm.kind == Norm::Kind::kRms; };
  const bool fuse_add = !tp_ && (fuse || be.fuses_linear_add(t));
  // The residual add of a projection with that bias (null data: none) inside it, or not.
  auto add_into = [&](const Tensor& bias) {
    ResidualFusion f;
    if (fuse || (fuse_add && !bias.data)) f.residual = residual;
    return f;
  };
  // Batch-1 decode through the backend's dense stack: every layer in one kernel, the residual stream complete
  // afterwards. Only up to the backend's context bound (short_decode_context), not in deterministic mode (its
  // reductions differ from the batched kernels'), and over a bf16 cache or, where the backend has the stack for it,
  // an FP8 one.
  const bool stack = stack_ && t == 1 && b.attn.all_decode && b.attn.num_seqs == 1 &&
                     b.attn.max_seqlen_k <= stack_max_context_ && !be.deterministic() && !kv.empty() &&
                     (kv.front().k.dtype == DType::kBF16 || (kv.front().k.dtype == DType::kFP8E4M3 && stack_fp8_));
  if (stack) {
    DenseStackStep st;
    st.residual = residual;
    st.scratch = stack_scratch_.data();
    st.positions = b.positions;
    st.slots = b.slots(0);
    st.seq_lens = b.attn.seq_lens_k;
    st.block_table = b.block_tables(0);
    st.kv = kv.data();
    be.dense_stack_decode(*stack_, st);
  }
  // The last layer runs on the logits rows only where a step wants fewer rows than it computes (prefill): its qkv
  // projection and KV write run for every row, then attention (not MLA's: there the rows are dropped after it),
  // o_proj and the feed-forward for the logits rows, since nothing after the layer reads the others. Not with
  // multi-token-prediction modules, which read every row's final hidden state.
  const size_t num_layers = stack ? 0 : blocks.size();
  const bool prune = n < t && mtp.empty();
  int64_t rows = t;      // rows the layers compute: t, then n from where the last layer drops the others
  Tensor kept_pending;  // pruned after MLA: the logits rows of its output, not yet added (pending)
  for (size_t i = 0; i < num_layers; ++i) {
    const DecoderBlock& L = blocks[i];
    const QkvLayout& lay = L.attn.layout;
    const bool last = prune && i + 1 == num_layers;
    if (L.mla) {
      pre_norm(L.attn_norm);
      L.mla->forward(be, b, normed, kv[i], inv_freq, ws + p.mla, proj);
      pending = &proj;
    } else {
      ResidualFusion f = add_into(L.attn.o_bias);
      if (fused_input(L.attn_norm)) {
        f.in_norm = &L.attn_norm;
        f.normed = normed;
      } else {
        pre_norm(L.attn_norm);
      }
      const Tensor x = f.in_norm ? residual : normed;  // every row: the qkv projection's input
      QueryRows kept_rows{&b.logits_indices, &b.logits_q, act(p.last_qkv, n, lay.row())};
      if (last) {  // the residual stream's logits rows, which o_proj then adds into (or the next norm adds it to)
        Tensor kept = act(p.last, n, h);
        if (n > 0) be.gather_rows(residual, b.logits_indices, kept);
        if (f.residual.data) f.residual = kept;
        residual = kept;
        proj = act(p.proj, n, h);
        rows = n;
      }
      L.attn.forward(be, b, x, kv[i], inv_freq, act(p.qkv, t, lay.row()),
                     act(p.attn, rows, lay.num_heads * lay.head_dim), proj, f, last ? &kept_rows : nullptr);
      pending = f.residual.data ? nullptr : &proj;
    }
    if (last && n == 0) return Tensor(ws + p.logits_f32, DType::kF32, {0, config_.vocab_size});  // none wanted
    if (tp_) all_reduce(proj);  // the heads' partial o_proj sums; the next norm adds them into the residual
    if (last && L.mla) {
      Tensor kept = act(p.last, n, h);
      be.gather_rows(residual, b.logits_indices, kept);
      if (pending) {  // the attention output, in proj: its rows into ffn's room, which the norm reads first
        kept_pending = act(p.ffn, n, h);
        be.gather_rows(*pending, b.logits_indices, kept_pending);
        pending = &kept_pending;
      }
      residual = kept;
      rows = n;
    }
    if (last) {
      normed = act(p.normed, n, h);
      ffn = act(p.ffn, n, h);
    }
    if (L.mlp) {
      ResidualFusion f = add_into(L.mlp->down_bias);
      if (fused_input(L.ffn_norm) && L.mlp->act.kind == Activation::kSiluGated) {
        f.in_norm = &L.ffn_norm;
        f.normed = normed;
      } else {
        pre_norm(L.ffn_norm);
      }
      L.mlp->forward(be, f.in_norm ? residual : normed, act(p.gate_up, rows, L.mlp->gate_up.dim(0)),
                     act(p.inter, rows, L.mlp->inter), ffn, f);
      pending = f.residual.data ? nullptr : &ffn;
    } else {
      pre_norm(L.ffn_norm);
      L.moe->forward(be, normed, ws + p.moe, ffn);
      pending = &ffn;
    }
    if (tp_) all_reduce(ffn);  // the intermediate columns' partial down_proj sums
  }
  pre_norm(final_norm);
  // The logits rows are strictly increasing token rows (ModelRunner::stage), so n == rows means every row in order
  // (decode steps, or the rows a pruned last layer kept): the gather would copy normed onto itself, and is one
  // kernel less a step without it.
  Tensor last = n == rows ? normed : act(p.last, n, h);
  if (n != rows) be.gather_rows(normed, b.logits_indices, last);
  Tensor logits_f32(ws + p.logits_f32, DType::kF32, {n, config_.vocab_size});
  if (tp_) {
    // Vocab-parallel lm_head: this rank's [n, vocab / N] slice, gathered rank after rank, then put back in
    // vocabulary order without the padding rows; every rank holds the same logits afterwards.
    const parallel::TpPlan& tp = tp_->plan;
    const int64_t per_rank = tp.vocab_per_rank;
    Tensor local = act(p.logits_act, n, per_rank);
    be.linear(last, lm_head, Tensor(), local);
    Tensor gathered = act(p.gathered, tp.tp_size * n, per_rank);
    const Status st = tp_->comm->all_gather(local, gathered);
    RL_CHECK_MSG(st.is_ok(), "tensor-parallel rank %d: %s", tp.rank, st.message().c_str());
    Tensor full = adt == DType::kF32 ? logits_f32 : act(p.logits_act, n, config_.vocab_size);
    for (int32_t r = 0; r < tp.tp_size; ++r) {
      const int64_t cols = std::clamp<int64_t>(config_.vocab_size - r * per_rank, 0, per_rank);
      if (cols > 0) be.copy_columns(gathered.slice_rows(r * n, n), 0, full, r * per_rank, cols);
    }
    if (adt != DType::kF32) be.cast(full, logits_f32);
  } else if (adt == DType::kF32) {
    be.linear(last, lm_head, Tensor(), logits_f32);
  } else {
    be.linear_widened(last, lm_head, act(p.logits_act, n, config_.vocab_size), logits_f32);
  }
  return logits_f32;
}

}  // namespace rl
