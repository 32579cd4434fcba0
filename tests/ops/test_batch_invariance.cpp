// Batch invariance of the CUDA backend's deterministic mode (issue 13): a row computed alone and inside batches of
// many sizes, prompt chunkings, prefix hits and mixed prefill/decode steps gives bitwise the same output. Also the
// invariant GEMM against the CPU reference (it is a separate kernel from the GEMV it must agree with).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "backend/cuda/cuda_kernels.h"
#include "ops_test_util.h"

namespace rl::ops_test {
namespace {

// Turns the deterministic mode on for one test and back off after it (the backend is shared by all tests).
struct DeterministicScope {
  DeterministicScope() { cuda().set_deterministic(true); }
  ~DeterministicScope() { cuda().set_deterministic(false); }
};

std::vector<uint8_t> bytes_of(const Tensor &t) {
  std::vector<uint8_t> b(t.nbytes());
  cuda().download(b.data(), t.data, b.size());
  return b;
}

// y = x[:m] · wᵀ for every m in ms on the first m rows of one x; each row's bytes must equal those of the largest m
// (and of every other m that contains the row).
void check_linear_invariant(int64_t n, int64_t k, bool with_bias, DType y_dt, const std::vector<int64_t> &ms) {
  const int64_t max_m = *std::max_element(ms.begin(), ms.end());
  auto x = random_bf16_values(max_m * k), w = random_bf16_values(n * k, -0.1f, 0.1f), b = random_bf16_values(n);
  auto c_x = make_bf16(cuda(), x, {max_m, k}), c_w = make_bf16(cuda(), w, {n, k}), c_b = make_bf16(cuda(), b, {n});
  const size_t row_bytes = static_cast<size_t>(n) * dtype_size(y_dt);
  std::vector<uint8_t> ref;
  {
    auto c_y = make(cuda(), y_dt, {max_m, n});
    poison(c_y.t);
    cuda().linear(c_x.t, c_w.t, with_bias ? c_b.t : Tensor(), c_y.t);
    ref = bytes_of(c_y.t);
    // The largest M against the CPU reference: the invariant kernels compute the right function.
    auto g_x = make_f32(cpu(), x, {max_m, k}), g_b = make_f32(cpu(), b, {n});
    auto g_w = make_bf16(cpu(), w, {n, k});
    auto g_y = make(cpu(), DType::kF32, {max_m, n});
    cpu().linear(g_x.t, g_w.t, with_bias ? g_b.t : Tensor(), g_y.t);
    EXPECT_LT(rel_err(read_f32(cuda(), c_y.t), read_f32(cpu(), g_y.t)), kBf16Tol) << "m=" << max_m;
  }
  for (int64_t m : ms) {
    Tensor xm(c_x.t.data, DType::kBF16, {m, k});
    auto c_y = make(cuda(), y_dt, {m, n});
    poison(c_y.t);
    cuda().linear(xm, c_w.t, with_bias ? c_b.t : Tensor(), c_y.t);
    const auto got = bytes_of(c_y.t);
    int64_t bad_rows = 0;
    for (int64_t r = 0; r < m; ++r) {
      bad_rows += std::memcmp(got.data() + r * row_bytes, ref.data() + r * row_bytes, row_bytes) != 0;
    }
    EXPECT_EQ(bad_rows, 0) << "m=" << m << " vs m=" << max_m << " (n=" << n << " k=" << k << ")";
  }
}

const std::vector<int64_t> kMs = {1,  2,  3,  7,  8,  9,   15,  16,  17,  24,  31, 32,
                                  33, 48, 63, 64, 65, 100, 127, 128, 129, 257, 700};

TEST(CudaBatchInvariance, LinearRowsIndependentOfM) {
  DeterministicScope det;
  check_linear_invariant(1000, 768, true, DType::kBF16, kMs);            // N not a multiple of any tile
  check_linear_invariant(520, 4096, false, DType::kF32, kMs);            // f32 output (logits)
  check_linear_invariant(384, 200, true, DType::kBF16, kMs);             // K tail: 6 full steps + a partial one
  check_linear_invariant(256, 96, false, DType::kBF16, kMs);             // 3 steps: shorter than one pipeline stage
  check_linear_invariant(96, 100, true, DType::kBF16, {1, 5, 70, 130});  // K % 8 != 0: scalar path, any M
}

TEST(CudaBatchInvariance, LinearSkinnyWideMatchesCpu) {
  // M in (16, 64]: the split-K GEMV's 4 and 8 n8-tile instances (kernel lab).
  for (int64_t m : {17, 32, 40, 64}) {
    auto x = random_bf16_values(m * 1024), w = random_bf16_values(768 * 1024, -0.1f, 0.1f);
    auto g_x = make_f32(cpu(), x, {m, 1024}), g_w = make_bf16(cpu(), w, {768, 1024});
    auto g_y = make(cpu(), DType::kF32, {m, 768});
    auto c_x = make_bf16(cuda(), x, {m, 1024}), c_w = make_bf16(cuda(), w, {768, 1024});
    auto c_y = make(cuda(), DType::kBF16, {m, 768});
    poison(c_y.t);
    cpu().linear(g_x.t, g_w.t, Tensor(), g_y.t);
    cuda::launch_gemv(static_cast<const uint16_t *>(c_x.t.data), static_cast<const uint16_t *>(c_w.t.data), nullptr,
                      DType::kBF16, c_y.t.data, DType::kBF16, m, 768, 1024, cuda().stream());
    EXPECT_LT(rel_err(read_f32(cuda(), c_y.t), read_f32(cpu(), g_y.t)), kBf16Tol) << "m=" << m;
  }
}

TEST(CudaBatchInvariance, InvariantGemmTileConfigsAgreeBitwise) {
  // Every tile configuration computes the same canonical order: identical bits at any M.
  for (int64_t m : {3, 16, 77}) {
    const int64_t n = 700, k = 1000;
    auto x = random_bf16_values(m * k), w = random_bf16_values(n * k, -0.1f, 0.1f), b = random_bf16_values(n);
    auto c_x = make_bf16(cuda(), x, {m, k}), c_w = make_bf16(cuda(), w, {n, k}), c_b = make_f32(cuda(), b, {n});
    std::vector<uint8_t> first;
    for (int config = 1; config <= 9; ++config) {
      auto c_y = make(cuda(), DType::kBF16, {m, n});
      poison(c_y.t);
      cuda::launch_gemm_invariant_lab(static_cast<const uint16_t *>(c_x.t.data),
                                      static_cast<const uint16_t *>(c_w.t.data), c_b.t.data, DType::kF32, c_y.t.data,
                                      DType::kBF16, m, n, k, cuda().stream(), config);
      const auto got = bytes_of(c_y.t);
      if (config == 1) {
        first = got;
        auto g_x = make_f32(cpu(), x, {m, k}), g_b = make_f32(cpu(), b, {n});
        auto g_w = make_bf16(cpu(), w, {n, k});
        auto g_y = make(cpu(), DType::kF32, {m, n});
        cpu().linear(g_x.t, g_w.t, g_b.t, g_y.t);
        EXPECT_LT(rel_err(read_f32(cuda(), c_y.t), read_f32(cpu(), g_y.t)), kBf16Tol) << "m=" << m;
      } else {
        EXPECT_TRUE(got == first) << "config " << config << " m=" << m;
      }
    }
  }
}

// --- attention ---

constexpr int64_t kBs = 16;

// One sequence of an attention step: its blocks in the shared cache, its context length and the rows of q it brings
// this step (q_len rows of the full qkv row width).
struct StepSeq {
  std::vector<int32_t> blocks;
  int64_t ctx = 0;
  std::vector<float> qkv_rows;  // [q_len, row]
  int64_t q_len = 0;
};

// Runs one attention step over `cache` and returns the output bytes, one entry per token.
std::vector<std::vector<uint8_t>> run_step(const std::vector<StepSeq> &seqs, const QkvLayout &l,
                                           const KvLayer &cache) {
  const int64_t num_seqs = static_cast<int64_t>(seqs.size());
  int64_t num_tokens = 0, max_q = 0, max_k = 0, max_blocks = 1;
  for (const auto &s : seqs) {
    num_tokens += s.q_len;
    max_q = std::max(max_q, s.q_len);
    max_k = std::max(max_k, s.ctx);
    max_blocks = std::max<int64_t>(max_blocks, static_cast<int64_t>(s.blocks.size()));
  }
  std::vector<int32_t> cu(num_seqs + 1, 0), lens(num_seqs), table(num_seqs * max_blocks, -1);
  std::vector<float> qkv;
  for (int64_t i = 0; i < num_seqs; ++i) {
    cu[i + 1] = cu[i] + static_cast<int32_t>(seqs[i].q_len);
    lens[i] = static_cast<int32_t>(seqs[i].ctx);
    std::copy(seqs[i].blocks.begin(), seqs[i].blocks.end(), table.begin() + i * max_blocks);
    qkv.insert(qkv.end(), seqs[i].qkv_rows.begin(), seqs[i].qkv_rows.end());
  }
  auto c_cu = make_i32(cuda(), cu, {num_seqs + 1}), c_lens = make_i32(cuda(), lens, {num_seqs});
  auto c_table = make_i32(cuda(), table, {num_seqs, max_blocks});
  auto c_qkv = make_bf16(cuda(), qkv, {num_tokens, l.row()});
  auto c_out = make(cuda(), DType::kBF16, {num_tokens, l.num_heads * l.head_dim});
  poison(c_out.t);
  AttentionMetadata m;
  m.cu_seqlens_q = c_cu.t;
  m.seq_lens_k = c_lens.t;
  m.block_tables = c_table.t;
  m.num_seqs = num_seqs;
  m.max_seqlen_q = max_q;
  m.max_seqlen_k = max_k;
  m.all_decode = max_q == 1;
  m.layout = l;
  m.scale = 1.0f / std::sqrt(static_cast<float>(l.head_dim));
  cuda().attention(c_qkv.t, cache, m, c_out.t);
  const auto all = bytes_of(c_out.t);
  const size_t rb = static_cast<size_t>(l.num_heads * l.head_dim) * 2;
  std::vector<std::vector<uint8_t>> rows(static_cast<size_t>(num_tokens));
  for (int64_t t = 0; t < num_tokens; ++t) rows[t].assign(all.begin() + t * rb, all.begin() + (t + 1) * rb);
  return rows;
}

void check_attention_invariant(int64_t heads, int64_t kv_heads, int64_t d, int64_t target_len) {
  DeterministicScope det;
  const QkvLayout l{heads, kv_heads, d};
  const int64_t kv_row = kv_heads * d;
  // A cache big enough for the target and every other sequence below (about 1,550 blocks).
  const int64_t target_blocks = (target_len + kBs - 1) / kBs, other_blocks = 2000;
  const int64_t num_blocks = 1 + target_blocks + other_blocks;
  auto k = random_bf16_values(num_blocks * kBs * kv_row, -2, 2),
       v = random_bf16_values(num_blocks * kBs * kv_row, -2, 2);
  auto c_k = make_bf16(cuda(), k, {num_blocks, kBs, kv_heads, d}),
       c_v = make_bf16(cuda(), v, {num_blocks, kBs, kv_heads, d});
  const KvLayer cache{c_k.t, c_v.t};
  std::vector<int32_t> ids(static_cast<size_t>(num_blocks - 1));
  std::iota(ids.begin(), ids.end(), 1);
  std::shuffle(ids.begin(), ids.end(), rng());
  size_t next = 0;
  auto take = [&](int64_t n) {
    std::vector<int32_t> b(ids.begin() + next, ids.begin() + next + n);
    next += static_cast<size_t>(n);
    return b;
  };
  const std::vector<int32_t> target_table = take(target_blocks);
  const auto target_q = random_bf16_values(target_len * l.row(), -2, 2);  // q rows of every target position
  // The target with its rows [first, first + q_len) this step.
  auto target = [&](int64_t first, int64_t q_len) {
    StepSeq s;
    s.blocks = target_table;
    s.ctx = first + q_len;
    s.q_len = q_len;
    s.qkv_rows.assign(target_q.begin() + first * l.row(), target_q.begin() + (first + q_len) * l.row());
    return s;
  };
  auto other = [&](int64_t q_len, int64_t ctx) {
    StepSeq s;
    s.blocks = take((ctx + kBs - 1) / kBs);
    s.ctx = ctx;
    s.q_len = q_len;
    s.qkv_rows = random_bf16_values(q_len * l.row(), -2, 2);
    return s;
  };
  const int64_t last = target_len - 1;
  // Reference: the target's last position decoded alone (KV chunks in parallel blocks when there are several).
  const auto ref = run_step({target(last, 1)}, l, cache)[0];
  int cases = 0;
  {
    // The chunked arithmetic is still attention: within bf16 rounding of the default (split-KV) kernels.
    cuda().set_deterministic(false);
    const auto fast = run_step({target(last, 1)}, l, cache)[0];
    cuda().set_deterministic(true);
    const auto as_f32 = [](const std::vector<uint8_t>& b, size_t i) {
      uint32_t u = static_cast<uint32_t>(b[2 * i] | (b[2 * i + 1] << 8)) << 16;
      float f;
      std::memcpy(&f, &u, 4);
      return f;
    };
    // Both round f32 results to bf16: allow 2 bf16 ulps of the larger value (and a floor near zero).
    size_t bad = 0;
    for (size_t i = 0; i < ref.size() / 2; ++i) {
      const float a = as_f32(ref, i), b = as_f32(fast, i);
      bad += !(std::fabs(a - b) <= std::ldexp(std::max(std::fabs(a), std::fabs(b)), -6) + 1e-3f);
    }
    EXPECT_EQ(bad, 0u) << "deterministic vs default attention (heads " << heads << "/" << kv_heads << " d=" << d
                       << " len=" << target_len << ")";
  }
  // The same decode with the chunks merged in registers (no room for parallel chunk states).
  cuda().set_chunk_scratch_limit(0);
  {
    const auto seq = run_step({target(last, 1)}, l, cache)[0];
    cuda().set_chunk_scratch_limit(-1);
    ++cases;
    EXPECT_TRUE(seq == ref) << "decode with chunks merged in registers (heads " << heads << "/" << kv_heads
                            << " d=" << d << " len=" << target_len << ")";
  }
  auto expect_same = [&](const std::vector<uint8_t> &got, const char *what) {
    ++cases;
    EXPECT_TRUE(got == ref) << what << " (heads " << heads << "/" << kv_heads << " d=" << d << " len=" << target_len
                            << ")";
  };
  // The whole prompt as one prefill (alone, and behind other sequences).
  expect_same(run_step({target(0, target_len)}, l, cache)[last], "full prefill alone");
  {
    auto out = run_step({other(37, 37), other(1, 300), target(0, target_len)}, l, cache);
    expect_same(out[37 + 1 + last], "full prefill in a mixed batch");
  }
  // Chunked prefills with prefix hits: the last chunk of several sizes.
  for (int64_t chunk : {int64_t(2), int64_t(17), int64_t(64), int64_t(129)}) {
    if (chunk > target_len) continue;
    auto out = run_step({target(target_len - chunk, chunk), other(5, 500)}, l, cache);
    expect_same(out[chunk - 1], "last prefill chunk");
  }
  // Decode among many decodes of other lengths, and among prefills.
  for (int64_t batch : {int64_t(2), int64_t(7), int64_t(63)}) {
    std::vector<StepSeq> seqs;
    for (int64_t i = 0; i < batch; ++i) seqs.push_back(other(1, 1 + static_cast<int64_t>(rng()() % 300)));
    const int64_t pos = static_cast<int64_t>(rng()() % (batch + 1));
    seqs.insert(seqs.begin() + pos, target(last, 1));
    expect_same(run_step(seqs, l, cache)[pos], "decode in a decode batch");
  }
  {
    auto out = run_step({other(100, 250), target(last, 1), other(1, 20)}, l, cache);
    expect_same(out[100], "decode beside a prefill");
  }
  EXPECT_GT(cases, 5);
}

TEST(CudaBatchInvariance, AttentionRowIndependentOfBatchAndChunking) {
  check_attention_invariant(32, 8, 128, 1000);
  check_attention_invariant(16, 16, 64, 333);
  check_attention_invariant(8, 2, 128, 4100);
  check_attention_invariant(8, 4, 256, 300);
  check_attention_invariant(40, 2, 128,
                            200);  // group of 20: the decode-shaped packed instance does not fit
}

}  // namespace
}  // namespace rl::ops_test
