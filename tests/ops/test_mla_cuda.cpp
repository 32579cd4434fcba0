// Multi-head latent attention on CUDA against the CPU reference at DeepSeek widths (kv_lora_rank 512, rope 64,
// nope 128; 16 and 128 heads; block size 16): mla_prepare (q RoPE + latent cache write, negative slots skipped),
// head_linear (per-head projections; a row's bits independent of the row count), and mla_attention for decode
// batches of mixed lengths up to 4,100 keys, prefills, chunked prefills with a prefix in the cache and mixed
// batches, through shuffled block tables with NaN in every unused cache slot; each in the default mode (split-K),
// the naive kernel, and deterministic mode, whose rows must also be bitwise independent of the batch (decoded alone,
// in a batch, as the last row of a whole or chunked prefill). The absorbed decode on CUDA equals the expanded
// attention transformers computes (k_nope and v per head from kv_b).
#include <algorithm>
#include <numeric>

#include "ops_test_util.h"

namespace rl::ops_test {
namespace {

constexpr int64_t kBs = 16, kNope = 128, kRope = 64, kRank = 512, kLat = kRank + kRope;

struct SeqSpec {
  int64_t q_len;    // new tokens this step
  int64_t ctx_len;  // context including them
};

// One batch: the cache (f32 on the CPU, bf16 with NaN in unused slots on the GPU), block tables, q_lat.
struct Batch {
  int64_t num_seqs = 0, num_tokens = 0, max_q = 0, max_k = 0, max_blocks = 0, num_blocks = 0;
  std::vector<int32_t> cu, lens, table;
  std::vector<float> cache, q;
  std::vector<uint16_t> cache_dev;
};

// target_table / target_q: optional fixed block ids of sequence `target` and its last query row (the batch
// invariance test places the same row, over the same cache rows, into different batches).
Batch make_batch(const std::vector<SeqSpec>& seqs, int64_t nh, const std::vector<float>* shared_cache = nullptr,
                 int64_t target = -1, const std::vector<int32_t>* target_table = nullptr,
                 const std::vector<float>* target_q = nullptr) {
  Batch b;
  b.num_seqs = static_cast<int64_t>(seqs.size());
  int64_t total_blocks = 0;
  for (const auto& s : seqs) {
    b.num_tokens += s.q_len;
    b.max_q = std::max(b.max_q, s.q_len);
    b.max_k = std::max(b.max_k, s.ctx_len);
    const int64_t nb = (s.ctx_len + kBs - 1) / kBs;
    b.max_blocks = std::max(b.max_blocks, nb);
    total_blocks += nb;
  }
  b.max_blocks += 2;  // spare table columns stay -1
  b.num_blocks = shared_cache ? static_cast<int64_t>(shared_cache->size()) / (kBs * kLat) : total_blocks + 3;
  std::vector<int32_t> ids(static_cast<size_t>(b.num_blocks - 1));
  std::iota(ids.begin(), ids.end(), 1);
  std::shuffle(ids.begin(), ids.end(), rng());
  if (target_table) {  // the others take blocks the target does not use
    ids.erase(std::remove_if(ids.begin(), ids.end(),
                             [&](int32_t id) {
                               return std::find(target_table->begin(), target_table->end(), id) != target_table->end();
                             }),
              ids.end());
  }
  b.cu.assign(static_cast<size_t>(b.num_seqs + 1), 0);
  b.lens.resize(static_cast<size_t>(b.num_seqs));
  b.table.assign(static_cast<size_t>(b.num_seqs * b.max_blocks), -1);
  size_t next = 0;
  for (int64_t s = 0; s < b.num_seqs; ++s) {
    b.cu[s + 1] = b.cu[s] + static_cast<int32_t>(seqs[s].q_len);
    b.lens[s] = static_cast<int32_t>(seqs[s].ctx_len);
    for (int64_t j = 0; j * kBs < seqs[s].ctx_len; ++j) {
      b.table[s * b.max_blocks + j] = s == target ? (*target_table)[j] : ids[next++];
    }
  }
  b.cache = shared_cache ? *shared_cache : random_bf16_values(static_cast<size_t>(b.num_blocks * kBs * kLat), -1, 1);
  b.cache_dev = to_bf16(b.cache);
  std::vector<bool> used(static_cast<size_t>(b.num_blocks * kBs), false);
  for (int64_t s = 0; s < b.num_seqs; ++s)
    for (int64_t p = 0; p < seqs[s].ctx_len; ++p) used[b.table[s * b.max_blocks + p / kBs] * kBs + p % kBs] = true;
  for (size_t slot = 0; slot < used.size(); ++slot) {
    if (used[slot]) continue;
    for (int64_t i = 0; i < kLat; ++i) {
      b.cache_dev[slot * kLat + i] = 0xffff;  // NaN on the GPU
      b.cache[slot * kLat + i] = 0.0f;
    }
  }
  b.q = random_bf16_values(static_cast<size_t>(b.num_tokens * nh * kLat), -1, 1);
  if (target_q) {
    const int64_t row = b.cu[target + 1] - 1;
    std::copy(target_q->begin(), target_q->end(), b.q.begin() + row * nh * kLat);
  }
  return b;
}

// Runs mla_attention on one backend; CUDA output as f32 values of its bf16 result.
std::vector<float> run_attention(Backend& be, const Batch& b, int64_t nh, int64_t max_seqlen_k_override = 0) {
  const bool gpu = &be != static_cast<Backend*>(&cpu());
  Owned cu = make_i32(be, b.cu, {b.num_seqs + 1}), lens = make_i32(be, b.lens, {b.num_seqs});
  Owned table = make_i32(be, b.table, {b.num_seqs, b.max_blocks});
  AttentionMetadata m;
  m.cu_seqlens_q = cu.t;
  m.seq_lens_k = lens.t;
  m.block_tables = table.t;
  m.num_seqs = b.num_seqs;
  m.max_seqlen_q = b.max_q;
  m.max_seqlen_k = max_seqlen_k_override > 0 ? max_seqlen_k_override : b.max_k;
  m.all_decode = b.max_q == 1;
  m.scale = 0.1f;
  const MlaLayout l{nh, kNope, kRope, kRank};
  Owned q = gpu ? make_bf16(be, b.q, {b.num_tokens, nh * kLat}) : make_f32(be, b.q, {b.num_tokens, nh * kLat});
  Owned cache = make(be, gpu ? DType::kBF16 : DType::kF32, {b.num_blocks, kBs, 1, kLat});
  if (gpu) {
    be.upload(cache.t.data, b.cache_dev.data(), b.cache_dev.size() * 2);
  } else {
    be.upload(cache.t.data, b.cache.data(), b.cache.size() * 4);
  }
  Owned out = make(be, be.act_dtype(), {b.num_tokens, nh * kRank});
  if (gpu) poison(out.t);
  KvLayer kv;
  kv.k = cache.t;
  be.mla_attention(q.t, kv, m, l, out.t);
  be.synchronize();
  return read_f32(be, out.t);
}

enum class Mode { kAuto, kNaive, kDeterministic };

double attention_error(const std::vector<SeqSpec>& seqs, int64_t nh, Mode mode, int64_t max_seqlen_k_override = 0) {
  const Batch b = make_batch(seqs, nh);
  const std::vector<float> ref = run_attention(cpu(), b, nh);
  cuda().set_attention_impl(mode == Mode::kNaive ? CudaBackend::AttentionImpl::kNaive
                                                 : CudaBackend::AttentionImpl::kAuto);
  cuda().set_deterministic(mode == Mode::kDeterministic);
  const std::vector<float> out = run_attention(cuda(), b, nh, max_seqlen_k_override);
  cuda().set_attention_impl(CudaBackend::AttentionImpl::kAuto);
  cuda().set_deterministic(false);
  return rel_err(out, ref);
}

const char* mode_name(Mode m) { return m == Mode::kAuto ? "auto" : m == Mode::kNaive ? "naive" : "deterministic"; }

void check_modes(const std::vector<SeqSpec>& seqs, const char* what, std::initializer_list<int64_t> heads = {16, 128}) {
  for (int64_t nh : heads) {
    for (Mode mode : {Mode::kAuto, Mode::kNaive, Mode::kDeterministic}) {
      EXPECT_LT(attention_error(seqs, nh, mode), kBf16Tol) << what << ", " << nh << " heads, " << mode_name(mode);
    }
  }
}

TEST(CudaMla, DecodeSingleSequences) {
  for (int64_t len : {1, 17, 255, 4097}) check_modes({{1, len}}, ("decode of " + std::to_string(len)).c_str());
}

TEST(CudaMla, DecodeBatchOfMixedLengths) {
  check_modes({{1, 1}, {1, 15}, {1, 16}, {1, 33}, {1, 1000}, {1, 4100}, {1, 64}, {1, 300}}, "decode batch");
}

TEST(CudaMla, DecodeBatch64) {
  std::vector<SeqSpec> seqs;
  for (int64_t i = 0; i < 64; ++i) seqs.push_back({1, 1 + (i * 997) % 1500});
  check_modes(seqs, "decode batch of 64", {16});
}

TEST(CudaMla, DecodeGridSizedForLongerContext) {
  // A CUDA graph captured at max_model_len passes that as max_seqlen_k: sequences must read their own lengths.
  const std::vector<SeqSpec> seqs = {{1, 5}, {1, 700}, {1, 2100}};
  for (int64_t nh : {16, 128}) {
    for (Mode mode : {Mode::kAuto, Mode::kDeterministic}) {
      EXPECT_LT(attention_error(seqs, nh, mode, 16384), kBf16Tol) << nh << " heads, " << mode_name(mode);
    }
  }
}

TEST(CudaMla, Prefill) { check_modes({{1, 1}, {31, 31}, {100, 100}, {257, 257}}, "prefill"); }

TEST(CudaMla, ChunkedPrefillWithPrefixAndMixedBatch) {
  check_modes({{40, 300}, {1, 50}, {100, 600}, {3, 3}, {1, 4097}}, "chunked prefill + decode");
}

// Deterministic mode: one query row gives the same bits alone, in decode batches, and as the last row of a whole
// or chunked prefill. Schedules: parallel chunks + combine for the decode steps; chunks walked in registers where
// the chunk states exceed the workspace (16 heads: the prefills of 1000 and 4100; 128 heads: the chunked prefill
// at 4100).
TEST(CudaMla, DeterministicRowIndependentOfBatch) {
  for (int64_t nh : {16, 128}) {
    for (int64_t ctx : {200, 1000, 4100}) {
      const int64_t blocks = (ctx + kBs - 1) / kBs;
      const auto cache = random_bf16_values(static_cast<size_t>((2 * blocks + 700) * kBs * kLat), -1, 1);
      std::vector<int32_t> ttable(static_cast<size_t>(blocks));
      std::iota(ttable.begin(), ttable.end(), 1);
      std::shuffle(ttable.begin(), ttable.end(), rng());
      const auto tq = random_bf16_values(static_cast<size_t>(nh * kLat), -1, 1);
      cuda().set_deterministic(true);
      auto row_of = [&](const std::vector<SeqSpec>& seqs, int64_t target) {
        const Batch b = make_batch(seqs, nh, &cache, target, &ttable, &tq);
        const std::vector<float> out = run_attention(cuda(), b, nh, 0);
        const int64_t row = b.cu[target + 1] - 1;
        return std::vector<float>(out.begin() + row * nh * kRank, out.begin() + (row + 1) * nh * kRank);
      };
      const std::vector<float> alone = row_of({{1, ctx}}, 0);
      const std::string what = std::to_string(nh) + " heads, context " + std::to_string(ctx);
      EXPECT_EQ(row_of({{1, 50}, {1, ctx}, {1, 3000}, {1, 7}}, 1), alone) << what << ": decode batch";
      if (ctx * nh <= 70000) {  // a whole prefill (host copies of q_lat stay below ~200 MB)
        EXPECT_EQ(row_of({{ctx, ctx}}, 0), alone) << what << ": last row of a prefill";
      }
      EXPECT_EQ(row_of({{1, 9}, {37, ctx}}, 1), alone) << what << ": last row of a chunked prefill";
      EXPECT_EQ(row_of({{20, 20}, {1, ctx}, {5, 100}}, 1), alone) << what << ": decode beside prefills";
      cuda().set_deterministic(false);
      // The deterministic row is also close to the default kernels' result.
      const Batch b = make_batch({{1, ctx}}, nh, &cache, 0, &ttable, &tq);
      EXPECT_LT(rel_err(alone, run_attention(cpu(), b, nh)), kBf16Tol) << what;
    }
  }
}

TEST(CudaMla, PrepareMatchesCpu) {
  for (int64_t nh : {16, 128}) {
    for (bool interleaved : {true, false}) {
      const int64_t t = 37, num_blocks = 4, num_slots = num_blocks * kBs, qh = kNope + kRope;
      auto q = random_bf16_values(static_cast<size_t>(t * nh * qh), -2, 2);
      auto ckv = random_bf16_values(static_cast<size_t>(t * kLat), -2, 2);
      auto norm = random_bf16_values(static_cast<size_t>(kRank), 0.5f, 1.5f);
      auto q_lat0 = random_bf16_values(static_cast<size_t>(t * nh * kLat));
      auto cache0 = random_bf16_values(static_cast<size_t>(num_slots * kLat));
      std::vector<int32_t> pos(static_cast<size_t>(t)), slots(static_cast<size_t>(t));
      std::vector<int32_t> perm(static_cast<size_t>(num_slots));
      std::iota(perm.begin(), perm.end(), 0);
      std::shuffle(perm.begin(), perm.end(), rng());
      for (int64_t i = 0; i < t; ++i) {
        pos[i] = static_cast<int32_t>((i * 131) % 5000);
        slots[i] = i % 5 == 3 ? -1 : perm[i];
      }
      std::vector<float> inv_freq(kRope / 2);
      for (int64_t i = 0; i < kRope / 2; ++i) inv_freq[i] = std::pow(10000.0f, -2.0f * i / kRope);
      MlaRopeParams p;
      p.layout = {nh, kNope, kRope, kRank};
      p.interleaved = interleaved;
      p.q_rope_scale = 1.37f;
      std::vector<float> got[2][2];
      Backend* bes[2] = {&cpu(), &cuda()};
      for (int k = 0; k < 2; ++k) {
        Backend& be = *bes[k];
        const bool gpu = k == 1;
        auto mk = [&](const std::vector<float>& v, std::initializer_list<int64_t> d) {
          return gpu ? make_bf16(be, v, d) : make_f32(be, v, d);
        };
        Owned tq = mk(q, {t, nh * qh}), tc = mk(ckv, {t, kLat}), tn = mk(norm, {kRank});
        Owned tl = mk(q_lat0, {t, nh * kLat}), cache = mk(cache0, {num_blocks, kBs, 1, kLat});
        Owned tp = make_i32(be, pos, {t}), ts = make_i32(be, slots, {t});
        Owned tf = make_f32(be, inv_freq, {kRope / 2});
        MlaRopeParams pp = p;
        pp.inv_freq = tf.t.f32();
        KvLayer kv;
        kv.k = cache.t;
        be.mla_prepare(tq.t, tc.t, tn.t, tp.t, ts.t, pp, tl.t, kv);
        be.synchronize();
        got[k][0] = read_f32(be, tl.t);
        got[k][1] = read_f32(be, cache.t);
      }
      const std::string what = std::to_string(nh) + " heads, interleaved " + std::to_string(interleaved);
      EXPECT_LT(rel_err(got[1][0], got[0][0]), kBf16Tol) << what;
      EXPECT_LT(rel_err(got[1][1], got[0][1]), kBf16Tol) << what;
      // Untouched: the q_lat columns head_linear fills, and the cache rows of skipped / unused slots.
      for (int64_t i = 0; i < t * nh; ++i) {
        for (int64_t c = 0; c < kRank; c += 37) {
          EXPECT_EQ(got[1][0][i * kLat + c], q_lat0[i * kLat + c]) << what;
        }
      }
      std::vector<bool> written(static_cast<size_t>(num_slots), false);
      for (int32_t s : slots) {
        if (s >= 0) written[s] = true;
      }
      for (int64_t s = 0; s < num_slots; ++s) {
        if (written[s]) continue;
        for (int64_t c = 0; c < kLat; c += 7) EXPECT_EQ(got[1][1][s * kLat + c], cache0[s * kLat + c]) << what;
      }
    }
  }
}

struct HeadCase {
  int64_t t, nh, n, k, x_stride, y_stride;
};

std::vector<float> head_linear_on(Backend& be, const HeadCase& c, const std::vector<float>& x,
                                  const std::vector<float>& w, const std::vector<float>& y0) {
  const bool gpu = &be != static_cast<Backend*>(&cpu());
  auto mk = [&](const std::vector<float>& v, std::initializer_list<int64_t> d) {
    return gpu ? make_bf16(be, v, d) : make_f32(be, v, d);
  };
  Owned tx = mk(x, {c.t, c.nh * c.x_stride}), ty = mk(y0, {c.t, c.nh * c.y_stride});
  Owned tw = make_bf16(be, w, {c.nh, c.n, c.k});
  be.head_linear(tx.t, c.x_stride, tw.t, ty.t, c.y_stride);
  be.synchronize();
  return read_f32(be, ty.t);
}

TEST(CudaMla, HeadLinearMatchesCpu) {
  const HeadCase cases[] = {{1, 128, kRank, kNope, kNope + kRope, kLat},  // W_UK into q_lat, decode
                            {5, 16, kRank, kNope, kNope + kRope, kLat},
                            {70, 16, kRank, kNope, kNope + kRope, kLat},
                            {3, 128, 128, kRank, kRank, 128},  // W_UV out of the latent
                            {200, 16, 128, kRank, kRank, 128},
                            {33, 4, 32, 16, 24, 40}};  // the golden fixture's widths
  for (const HeadCase& c : cases) {
    auto x = random_bf16_values(static_cast<size_t>(c.t * c.nh * c.x_stride));
    auto w = random_bf16_values(static_cast<size_t>(c.nh * c.n * c.k), -0.1f, 0.1f);
    auto y0 = random_bf16_values(static_cast<size_t>(c.t * c.nh * c.y_stride));
    const std::vector<float> ref = head_linear_on(cpu(), c, x, w, y0);
    const std::vector<float> out = head_linear_on(cuda(), c, x, w, y0);
    EXPECT_LT(rel_err(out, ref), kBf16Tol) << "T " << c.t << " heads " << c.nh << " N " << c.n << " K " << c.k;
    // Columns past N of each head are left alone.
    for (int64_t i = 0; i < c.t * c.nh; ++i)
      for (int64_t col = c.n; col < c.y_stride; col += 5)
        EXPECT_EQ(out[i * c.y_stride + col], y0[i * c.y_stride + col]);
    // A row's bits do not depend on how many rows are computed with it (batch invariance in both modes).
    if (c.t > 1) {
      HeadCase one = c;
      one.t = 1;
      const int64_t r = c.t - 1, xw = c.nh * c.x_stride, yw = c.nh * c.y_stride;
      const std::vector<float> x1(x.begin() + r * xw, x.begin() + (r + 1) * xw);
      const std::vector<float> y1(y0.begin() + r * yw, y0.begin() + (r + 1) * yw);
      EXPECT_EQ(head_linear_on(cuda(), one, x1, w, y1), std::vector<float>(out.begin() + r * yw, out.end()))
          << "T " << c.t;
    }
  }
}

// The absorbed decode (W_UK folded into q, attention over the latent rows, W_UV after) on CUDA against the
// expanded attention of transformers (k_nope and v per head from the latent, ordinary softmax), in double.
TEST(CudaMla, AbsorbedDecodeEqualsExpandedAttention) {
  const int64_t nh = 16, dv = 128, qh = kNope + kRope;
  const std::vector<SeqSpec> seqs = {{1, 7}, {1, 1}, {1, 300}, {1, 900}};
  Batch b = make_batch(seqs, nh);
  const int64_t ns = b.num_seqs;
  auto q = random_bf16_values(static_cast<size_t>(ns * nh * qh), -1, 1);
  auto w_uk_t = random_bf16_values(static_cast<size_t>(nh * kRank * kNope), -0.1f, 0.1f);  // [nh, r, dn]
  auto w_uv = random_bf16_values(static_cast<size_t>(nh * dv * kRank), -0.1f, 0.1f);       // [nh, dv, r]
  // q_lat's rope columns are q's rope part (mla_prepare's RoPE is tested above); head_linear fills the rest.
  for (int64_t i = 0; i < ns * nh; ++i)
    for (int64_t d = 0; d < kRope; ++d) b.q[i * kLat + kRank + d] = q[i * qh + kNope + d];
  CudaBackend& be = cuda();
  Owned tq = make_bf16(be, q, {ns, nh * qh}), tl = make_bf16(be, b.q, {ns, nh * kLat});
  Owned tuk = make_bf16(be, w_uk_t, {nh, kRank, kNope}), tuv = make_bf16(be, w_uv, {nh, dv, kRank});
  be.head_linear(tq.t, qh, tuk.t, tl.t, kLat);
  Owned cu = make_i32(be, b.cu, {ns + 1}), lens = make_i32(be, b.lens, {ns});
  Owned table = make_i32(be, b.table, {ns, b.max_blocks});
  Owned cache = make(be, DType::kBF16, {b.num_blocks, kBs, 1, kLat});
  be.upload(cache.t.data, b.cache_dev.data(), b.cache_dev.size() * 2);
  AttentionMetadata m = decode_metadata(cu.t, lens.t, table.t, ns, b.max_k);
  m.scale = 0.1f;
  Owned o_lat = make(be, DType::kBF16, {ns, nh * kRank}), out = make(be, DType::kBF16, {ns, nh * dv});
  KvLayer kv;
  kv.k = cache.t;
  be.mla_attention(tl.t, kv, m, MlaLayout{nh, kNope, kRope, kRank}, o_lat.t);
  be.head_linear(o_lat.t, kRank, tuv.t, out.t, dv);
  be.synchronize();
  const std::vector<float> got = read_f32(be, out.t);
  std::vector<float> ref(got.size());
  for (int64_t s = 0; s < ns; ++s) {
    const int64_t n = b.lens[s];
    // Expanded K (nope part) and V of every key for every head.
    std::vector<double> kn(static_cast<size_t>(n * nh * kNope)), v(static_cast<size_t>(n * nh * dv));
    for (int64_t j = 0; j < n; ++j) {
      const float* row = b.cache.data() + (b.table[s * b.max_blocks + j / kBs] * kBs + j % kBs) * kLat;
      for (int64_t h = 0; h < nh; ++h) {
        for (int64_t d = 0; d < kNope; ++d) {
          double acc = 0;
          for (int64_t x = 0; x < kRank; ++x) acc += static_cast<double>(w_uk_t[(h * kRank + x) * kNope + d]) * row[x];
          kn[(j * nh + h) * kNope + d] = acc;
        }
        for (int64_t d = 0; d < dv; ++d) {
          double acc = 0;
          for (int64_t x = 0; x < kRank; ++x) acc += static_cast<double>(w_uv[(h * dv + d) * kRank + x]) * row[x];
          v[(j * nh + h) * dv + d] = acc;
        }
      }
    }
    for (int64_t h = 0; h < nh; ++h) {
      const float* qv = q.data() + (s * nh + h) * qh;
      std::vector<double> sc(static_cast<size_t>(n));
      double mx = -1e300;
      for (int64_t j = 0; j < n; ++j) {
        const float* row = b.cache.data() + (b.table[s * b.max_blocks + j / kBs] * kBs + j % kBs) * kLat;
        double dot = 0;
        for (int64_t d = 0; d < kNope; ++d) dot += qv[d] * kn[(j * nh + h) * kNope + d];
        for (int64_t d = 0; d < kRope; ++d) dot += static_cast<double>(qv[kNope + d]) * row[kRank + d];
        sc[j] = dot * 0.1;
        mx = std::max(mx, sc[j]);
      }
      double sum = 0;
      for (double& x : sc) sum += (x = std::exp(x - mx));
      for (int64_t d = 0; d < dv; ++d) {
        double acc = 0;
        for (int64_t j = 0; j < n; ++j) acc += sc[j] / sum * v[(j * nh + h) * dv + d];
        ref[(s * nh + h) * dv + d] = static_cast<float>(acc);
      }
    }
  }
  // bf16 roundings of q_lat, the attended latent and the output: a few times the bf16 step.
  EXPECT_LT(rel_err(got, ref), 2e-2);
}

}  // namespace
}  // namespace rl::ops_test
