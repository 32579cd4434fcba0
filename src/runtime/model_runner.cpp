#include "runtime/model_runner.h"

#include <algorithm>
#include <cmath>

#include "core/log.h"

namespace rl {

ModelRunner::ModelRunner(Model* model, KvStorage* kv, const RunnerLimits& limits)
    : model_(model), kv_(kv), limits_(limits) {
  const int64_t bs = kv->block_size();
  if (limits_.max_blocks_per_seq <= 0) limits_.max_blocks_per_seq = (limits_.max_model_len + bs - 1) / bs;
  if (limits_.max_num_logits <= 0) limits_.max_num_logits = limits_.max_num_seqs;
  // Token fields hold max_num_seqs rows too: a graph bucket pads up to that many single-token rows.
  const int64_t s = limits_.max_num_seqs, t = std::max(limits_.max_num_tokens, s), g = kv->num_groups();
  off_.token_stride = t;
  off_.ids = 0;
  off_.pos = t;
  off_.slots = 2 * t;
  off_.cu = (2 + g) * t;
  off_.lens = off_.cu + s + 1;
  off_.logit_idx = off_.lens + s;
  off_.logit_cu = off_.logit_idx + std::max(limits_.max_num_logits, s);
  off_.tables = off_.logit_cu + s + 1;
  off_.total = off_.tables + s * g * limits_.max_blocks_per_seq;
  Backend& be = model->backend();
  for (int32_t*& h : h_staging_) {
    h = static_cast<int32_t*>(be.alloc_pinned(static_cast<size_t>(off_.total) * 4));
    std::fill(h, h + off_.total, 0);
  }
  d_staging_ = DeviceBuffer(&be, static_cast<size_t>(off_.total) * 4);
  // Graph buckets pad up to max_num_seqs rows, so the workspace must hold that many tokens and logits.
  model->reserve(std::max(limits_.max_num_tokens, s), std::max(limits_.max_num_logits, s));
  if (!limits_.enforce_eager && limits_.max_num_tokens >= 1) graphs_ = DecodeGraphs::create(&be, s);
  short_context_ = model->short_decode_context();
  if (graphs_ && short_context_ > 0 && short_context_ < limits_.max_model_len) {
    short_graphs_ = DecodeGraphs::create(&be, 1);
  }
}

namespace {
// Sequences at the front of a step with one new token each (AttentionMetadata::num_leading_decodes): the scheduler
// puts running requests first, so a mixed step's decodes lead its prefill chunks.
int64_t leading_decodes(const std::vector<SeqStep>& seqs) {
  int64_t n = 0;
  while (n < static_cast<int64_t>(seqs.size()) && seqs[static_cast<size_t>(n)].num_new_tokens == 1) ++n;
  return n;
}

// Logits rows of a sequence in a step: every new token's, its last token's, or none (stage() stages the same).
int64_t logits_rows(const SeqStep& s) { return s.all_logits ? s.num_new_tokens : s.want_logits ? 1 : 0; }

// The host's view of the logits rows as attention queries (ForwardBatch::logits_q; stage() stages cu_seqlens_q).
void set_logits_queries(const std::vector<SeqStep>& seqs, ForwardBatch::LogitsQueries* q) {
  q->max_seqlen_q = 0;
  q->all_decode = true;
  q->num_leading_decodes = 0;
  bool leading = true;
  for (const SeqStep& s : seqs) {
    const int64_t rows = logits_rows(s);
    q->max_seqlen_q = std::max(q->max_seqlen_q, rows);
    q->all_decode = q->all_decode && rows == 1;
    leading = leading && rows == 1;
    if (leading) ++q->num_leading_decodes;
  }
}
}  // namespace

ModelRunner::~ModelRunner() {
  for (int32_t* h : h_staging_) model_->backend().free_pinned(h);
}

int64_t ModelRunner::stage(int32_t* h, const std::vector<SeqStep>& seqs, int64_t num_rows, int64_t* num_logits,
                           int64_t* max_q, int64_t* max_k, bool* all_decode, bool* any_pending) {
  const int64_t bs = kv_->block_size(), mb = limits_.max_blocks_per_seq, num_groups = kv_->num_groups();
  const int64_t row = num_groups * mb;  // one sequence's tables, group after group
  int64_t t = 0, n = 0;
  *any_pending = false;
  *max_q = 0;
  *max_k = 0;
  *all_decode = true;
  h[off_.cu] = 0;
  h[off_.logit_cu] = 0;
  std::fill(h + off_.tables, h + off_.tables + num_rows * row, 0);
  for (size_t i = 0; i < seqs.size(); ++i) {
    const SeqStep& s = seqs[i];
    RL_CHECK(s.num_new_tokens > 0 && s.num_blocks <= mb);
    for (int64_t g = 1; g < num_groups; ++g) {
      RL_CHECK_MSG(s.window_tables[g - 1] != nullptr, "a sequence without the block table of KV group %lld",
                   static_cast<long long>(g));
    }
    const int64_t len = s.num_computed + s.num_new_tokens;
    RL_CHECK_MSG((len + bs - 1) / bs <= s.num_blocks, "sequence needs %lld blocks, has %lld",
                 static_cast<long long>((len + bs - 1) / bs), static_cast<long long>(s.num_blocks));
    RL_CHECK_MSG(t + s.num_new_tokens <= limits_.max_num_tokens, "step has more than %lld tokens",
                 static_cast<long long>(limits_.max_num_tokens));
    for (int64_t j = 0; j < s.num_new_tokens; ++j) {
      const int64_t p = s.num_computed + j;
      if (s.all_logits) {
        RL_CHECK(n < limits_.max_num_logits);
        h[off_.logit_idx + n++] = static_cast<int32_t>(t);
      }
      if (s.token_ids[j] < 0) {
        RL_CHECK_MSG(s.pending_source >= 0, "a pending input token without its source row");
        h[off_.ids + t] = -(s.pending_source + 1);
        *any_pending = true;
      } else {
        h[off_.ids + t] = s.token_ids[j];
      }
      h[off_.pos + t] = static_cast<int32_t>(p);
      h[off_.slots + t] = static_cast<int32_t>(s.block_table[p / bs] * bs + p % bs);
      for (int64_t g = 1; g < num_groups; ++g) {
        const int32_t block = s.window_tables[g - 1][p / bs];
        RL_CHECK_MSG(block != 0, "KV group %lld has no block for position %lld", static_cast<long long>(g),
                     static_cast<long long>(p));
        h[off_.slots + g * off_.token_stride + t] = static_cast<int32_t>(block * bs + p % bs);
      }
      ++t;
    }
    h[off_.cu + static_cast<int64_t>(i) + 1] = static_cast<int32_t>(t);
    h[off_.lens + static_cast<int64_t>(i)] = static_cast<int32_t>(len);
    int32_t* tables = h + off_.tables + static_cast<int64_t>(i) * row;
    std::copy(s.block_table, s.block_table + s.num_blocks, tables);
    for (int64_t g = 1; g < num_groups; ++g) {
      std::copy(s.window_tables[g - 1], s.window_tables[g - 1] + s.num_blocks, tables + g * mb);
    }
    if (s.want_logits && !s.all_logits) {
      RL_CHECK(n < limits_.max_num_logits);
      h[off_.logit_idx + n++] = static_cast<int32_t>(t - 1);
    }
    h[off_.logit_cu + static_cast<int64_t>(i) + 1] = static_cast<int32_t>(n);
    *max_q = std::max(*max_q, s.num_new_tokens);
    *max_k = std::max(*max_k, len);
    *all_decode = *all_decode && s.num_new_tokens == 1;
  }
  // Padding rows (graph buckets): token 0 at position 0, KV slot -1 (not written), one key read through block
  // 0 (never handed out), logits computed for their own row and never downloaded.
  for (int64_t i = static_cast<int64_t>(seqs.size()); i < num_rows; ++i) {
    h[off_.ids + t] = 0;
    h[off_.pos + t] = 0;
    for (int64_t g = 0; g < num_groups; ++g) h[off_.slots + g * off_.token_stride + t] = -1;
    h[off_.logit_idx + i] = static_cast<int32_t>(t);
    ++t;
    h[off_.cu + i + 1] = static_cast<int32_t>(t);
    h[off_.logit_cu + i + 1] = static_cast<int32_t>(i + 1);  // a graph's rows: one logits row each
    h[off_.lens + i] = 1;
  }
  *num_logits = n;
  return t;
}

ForwardBatch ModelRunner::make_batch(int64_t t, int64_t num_seqs, int64_t n, int64_t max_q, int64_t max_k,
                                     bool all_decode) const {
  auto field = [&](int64_t offset, std::initializer_list<int64_t> dims) {
    return Tensor(static_cast<int32_t*>(d_staging_.data()) + offset, DType::kI32, dims);
  };
  ForwardBatch b;
  b.num_tokens = t;
  b.num_logits = n;
  b.input_ids = field(off_.ids, {t});
  b.positions = field(off_.pos, {t});
  b.slot_mapping = field(off_.slots, {t});
  b.logits_indices = field(off_.logit_idx, {n});
  const ModelConfig& c = model_->config();
  b.attn.cu_seqlens_q = field(off_.cu, {num_seqs + 1});
  b.logits_q.cu_seqlens_q = field(off_.logit_cu, {num_seqs + 1});
  b.attn.seq_lens_k = field(off_.lens, {num_seqs});
  // Group g's tables start g * max_blocks_per_seq into each row; the row stride covers every group's.
  const int64_t num_groups = kv_->num_groups(), mb = limits_.max_blocks_per_seq;
  b.attn.block_tables = field(off_.tables, {num_seqs, num_groups * mb});
  for (int64_t g = 1; g < num_groups; ++g) {
    b.window_slot_mapping[g - 1] = field(off_.slots + g * off_.token_stride, {t});
    b.window_block_tables[g - 1] = field(off_.tables + g * mb, {num_seqs, num_groups * mb});
  }
  b.attn.num_seqs = num_seqs;
  b.attn.max_seqlen_q = max_q;
  b.attn.max_seqlen_k = max_k;
  b.attn.all_decode = all_decode;
  b.attn.scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  b.attn.layout = {c.num_attention_heads, c.num_kv_heads, c.head_dim};
  return b;
}

size_t ModelRunner::upload_bytes(int64_t num_rows) const {
  // Every field up to the end of the used block-table rows (the gaps are a few KB).
  return static_cast<size_t>(off_.tables + num_rows * kv_->num_groups() * limits_.max_blocks_per_seq) * 4;
}

void ModelRunner::step(const std::vector<SeqStep>& seqs, std::vector<float>* logits_out) {
  const int64_t num_seqs = static_cast<int64_t>(seqs.size());
  RL_CHECK(num_seqs > 0 && num_seqs <= limits_.max_num_seqs);
  int64_t n = 0, max_q = 0, max_k = 0;
  bool all_decode = true, any_pending = false;
  Backend& be = model_->backend();
  be.synchronize();  // the pinned staging may still be read by an enqueued copy
  const int64_t t = stage(h_staging_[0], seqs, num_seqs, &n, &max_q, &max_k, &all_decode, &any_pending);
  RL_CHECK_MSG(!any_pending, "step() has no previous step to read pending tokens from");
  be.upload_async(d_staging_.data(), h_staging_[0], upload_bytes(num_seqs));
  ForwardBatch b = make_batch(t, num_seqs, n, max_q, max_k, all_decode);
  b.attn.num_leading_decodes = leading_decodes(seqs);
  set_logits_queries(seqs, &b.logits_q);
  Tensor logits = model_->forward(b, kv_->layers());
  logits_out->resize(static_cast<size_t>(n * model_->config().vocab_size));
  if (n > 0) be.download(logits_out->data(), logits.data, logits_out->size() * sizeof(float));
}

int64_t ModelRunner::launch(const std::vector<SeqStep>& seqs, std::span<const SamplerRow> rows, Sampler* sampler,
                            int parity) {
  const int64_t num_seqs = static_cast<int64_t>(seqs.size());
  RL_CHECK(num_seqs > 0 && num_seqs <= limits_.max_num_seqs);
  // A graph serves steps of single-token sequences that all want exactly their last token's logits.
  bool graphable = graphs_ != nullptr;
  for (const SeqStep& s : seqs) graphable = graphable && s.num_new_tokens == 1 && s.want_logits && !s.all_logits;
  const int64_t bucket = graphable ? graphs_->bucket_for(num_seqs) : 0;
  const int64_t num_rows = bucket > 0 ? bucket : num_seqs;

  int64_t n = 0, max_q = 0, max_k = 0;
  bool all_decode = true, any_pending = false;
  int32_t* h = h_staging_[parity];
  const int64_t t = stage(h, seqs, num_rows, &n, &max_q, &max_k, &all_decode, &any_pending);
  RL_CHECK(static_cast<int64_t>(rows.size()) == n);
  Backend& be = model_->backend();
  const int64_t num_sample_rows = bucket > 0 ? bucket : n;
  // The staging and the sampling parameters in one upload, which resolves the pending input ids (from the previous
  // step's sampled ids, still on the device) as it writes them.
  Backend::PinnedUpload uploads[2] = {{d_staging_.data(), h, upload_bytes(num_rows)}, {}};
  sampler->prepare(rows, num_sample_rows, parity, &uploads[1]);
  const Backend::PendingIds pending{Tensor(static_cast<int32_t*>(d_staging_.data()) + off_.ids, DType::kI32, {t}),
                                    sampler->sampled_ids()};
  be.upload_many_async(uploads, 2, any_pending ? &pending : nullptr);
  // A single short sequence: the short graphs, captured with max_seqlen_k = short_context_.
  const bool short_step = bucket == 1 && short_graphs_ && max_k <= short_context_;
  std::unique_ptr<DecodeGraphs>& graphs = short_step ? short_graphs_ : graphs_;
  if (bucket > 0 && graphs) {
    // The graph's decode grid is sized for max_model_len (or the short bound); the kernel reads each sequence's
    // length on the device.
    const ForwardBatch b = make_batch(t, num_rows, num_rows, 1, short_step ? short_context_ : limits_.max_model_len,
                                      true);
    const auto body = [&] {
      Tensor logits = model_->forward(b, kv_->layers());
      sampler->sample(logits, num_rows);
    };
    if (graphs->captured(bucket)) {
      graphs->replay(bucket);
      ++num_graph_steps_;
    } else {
      be.set_gemm_tuning(true);  // eager first: warms up lazily loaded kernels, tunes and caches GEMM plans
      body();
      be.set_gemm_tuning(false);
      const Status st = graphs->capture(bucket, body);
      if (!st.is_ok()) {
        log_warn(st.message() + "; decode steps run eagerly");
        graphs.reset();
      }
    }
  } else {
    ForwardBatch b = make_batch(t, num_seqs, n, max_q, max_k, all_decode);
    b.attn.num_leading_decodes = leading_decodes(seqs);
    set_logits_queries(seqs, &b.logits_q);
    Tensor logits = model_->forward(b, kv_->layers());
    if (n > 0) sampler->sample(logits, n);
  }
  sampler->fetch(n, parity);
  return n;
}

}  // namespace rl
