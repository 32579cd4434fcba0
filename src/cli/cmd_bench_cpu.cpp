// `ridgeline bench cpu`: the CPU backend's kernels against this machine's measured memory
// bandwidth, for 1 and 2 threads (or --threads). First the read bandwidth (a vectorised integer sum
// over a buffer far larger than the last-level cache), then, for every kernel tier the CPU supports
// (or --isa), the linear layer at decode (M = 1, weights streamed once: GB/s of weights and the
// fraction of the read bandwidth) and at prefill (M = 64: GFLOP/s), for bf16, int8 and f32 weights.
// Weight matrices are 1 GiB (bf16) so that no cache holds them. Last, decode attention over an f32 and a bf16 KV
// cache (a Qwen3-0.6B layer at --attn-context tokens: microseconds per layer and GB/s of K and V).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "cli/bench_commands.h"
#include "core/file.h"
#include "core/log.h"
#include "core/quant.h"

namespace rl::cli {

namespace {

struct CpuBenchOptions {
  std::vector<int> threads{1, 2};
  std::string isa;  // empty: every supported tier
  int64_t k = 1024;
  int64_t gemv_mib = 1024;
  int64_t attn_context = 512;
  int reps = 3;
};

// Best-of-reps wall time of fn().
template <typename F>
double best_seconds(int reps, F&& fn) {
  double best = 1e30;
  for (int i = 0; i < reps; ++i) {
    const double t0 = now_seconds();
    fn();
    best = std::min(best, now_seconds() - t0);
  }
  return best;
}

double read_bandwidth(ThreadPool& pool, const std::vector<uint64_t>& buf, int reps) {
  std::vector<uint64_t> sums(static_cast<size_t>(pool.num_threads()) * 8);
  const double s = best_seconds(reps, [&] {
    pool.parallel_for(
        static_cast<int64_t>(buf.size()),
        [&](int64_t b, int64_t e, int t) {
          uint64_t acc = 0;  // integer adds are associative: the compiler vectorises this loop
          for (int64_t i = b; i < e; ++i) acc += buf[static_cast<size_t>(i)];
          sums[static_cast<size_t>(t) * 8] += acc;
        },
        4096);
  });
  return static_cast<double>(buf.size() * 8) / s;
}

// Decode attention of a Qwen3-0.6B layer (16 query heads, 8 KV heads, head dim 128; one query token at `context`
// keys) over an f32 and a bf16 cache. One timed pass runs the 28 layers' caches in turn, as a decode step does,
// so that K and V come from memory (28 x 2 x context x 4 KiB in f32) rather than the last-level cache.
void bench_attention(CpuBackend& be, const std::string& tier, int threads, int64_t context, int reps) {
  constexpr int64_t kHeads = 16, kKvHeads = 8, kHeadDim = 128, kLayers = 28, kBlock = 16;
  const QkvLayout l{kHeads, kKvHeads, kHeadDim};
  const int64_t blocks = (context + kBlock - 1) / kBlock + 1;  // block 0 is never handed out
  const int64_t elems = blocks * kBlock * kKvHeads * kHeadDim;  // of one layer's K (or V)
  std::vector<int32_t> cu = {0, 1}, lens = {static_cast<int32_t>(context)}, table(static_cast<size_t>(blocks - 1));
  for (size_t b = 0; b < table.size(); ++b) table[b] = static_cast<int32_t>(b + 1);
  std::vector<float> qkv(static_cast<size_t>(l.row())), out(static_cast<size_t>(kHeads * kHeadDim));
  for (size_t i = 0; i < qkv.size(); ++i) qkv[i] = static_cast<float>((i * 7919) % 1000) / 1000.0f - 0.5f;
  AttentionMetadata m;
  m.cu_seqlens_q = Tensor(cu.data(), DType::kI32, {2});
  m.seq_lens_k = Tensor(lens.data(), DType::kI32, {1});
  m.block_tables = Tensor(table.data(), DType::kI32, {1, blocks - 1});
  m.num_seqs = 1;
  m.max_seqlen_q = 1;
  m.max_seqlen_k = context;
  m.all_decode = true;
  m.layout = l;
  m.scale = 1.0f / std::sqrt(static_cast<float>(kHeadDim));
  const Tensor q(qkv.data(), DType::kF32, {1, l.row()}), o(out.data(), DType::kF32, {1, kHeads * kHeadDim});
  for (DType dt : {DType::kF32, DType::kBF16}) {
    // K and V of every layer: bf16 values (the f32 cache holds them widened).
    // Allocated as the engine allocates its KV pool (Backend::alloc_zeroed: huge pages where the OS gives them).
    const size_t es = dtype_size(dt), n = static_cast<size_t>(2 * kLayers * elems);
    DeviceBuffer cache_buf(&be, n * es, DeviceBuffer::Zeroed{});
    char* const cache_data = static_cast<char*>(cache_buf.data());
    uint64_t state = 0x2545f4914f6cdd1dull;
    for (size_t i = 0; i < n; ++i) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      const float v = bf16_to_f32(f32_to_bf16(static_cast<float>(static_cast<int32_t>(state >> 40) - (1 << 23)) /
                                              static_cast<float>(1 << 23)));
      convert_from_f32(&v, cache_data + i * es, dt, 1);
    }
    const auto layer = [&](int64_t i) {
      char* k = cache_data + static_cast<size_t>(2 * i * elems) * es;
      char* v = k + static_cast<size_t>(elems) * es;
      return KvLayer{Tensor(k, dt, {blocks, kBlock, kKvHeads, kHeadDim}),
                     Tensor(v, dt, {blocks, kBlock, kKvHeads, kHeadDim})};
    };
    const auto step = [&] {
      for (int64_t i = 0; i < kLayers; ++i) be.attention(q, layer(i), m, o);
    };
    step();
    const double s = best_seconds(reps, step) / kLayers;
    const double bytes = static_cast<double>(2 * context * kKvHeads * kHeadDim) * static_cast<double>(es);
    std::printf("RESULT threads=%d isa=%s attn_decode_%s context=%lld us_per_layer=%.1f GB/s=%.2f\n", threads,
                tier.c_str(), std::string(dtype_name(dt)).c_str(), static_cast<long long>(context), s * 1e6,
                bytes / s / 1e9);
  }
}

int run(const CpuBenchOptions& o) {
  std::vector<CpuIsa> tiers;
  if (o.isa.empty()) {
    tiers = supported_cpu_isas();
  } else {
    CpuIsa isa;
    if (!parse_cpu_isa(o.isa, &isa) || isa > detect_cpu_isa()) {
      std::fprintf(stderr, "ridgeline: error: --isa %s is not a tier this CPU supports\n",
                   o.isa.c_str());
      return 1;
    }
    tiers = {isa};
  }
  const int64_t k = o.k;
  const int64_t n_gemv = (o.gemv_mib << 20) / (2 * k);  // bf16 rows of a gemv_mib MiB matrix
  const int64_t n_gemm = 3 * k, m_gemm = 64;
  std::printf("# bench cpu: detected %s; GEMV [%lld x %lld], GEMM M=%lld [%lld x %lld]\n",
              std::string(cpu_isa_name(detect_cpu_isa())).c_str(), static_cast<long long>(n_gemv),
              static_cast<long long>(k), static_cast<long long>(m_gemm),
              static_cast<long long>(n_gemm), static_cast<long long>(k));

  // Weights: random bf16, the same values as int8 (per-row scales) and as f32 (half as many rows: 1
  // GiB too).
  std::vector<uint16_t> w_bf16(static_cast<size_t>(n_gemv * k));
  uint64_t state = 0x9e3779b97f4a7c15ull;
  for (auto& v : w_bf16) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    v = f32_to_bf16(static_cast<float>(static_cast<int32_t>(state >> 40) - (1 << 23)) /
                    static_cast<float>(1 << 23));
  }
  std::vector<char> w_i8(i8_weight_bytes(n_gemv, k));
  {
    std::vector<float> row(static_cast<size_t>(k));
    char* base = w_i8.data();
    float* sc = reinterpret_cast<float*>(base + i8_scale_offset(n_gemv, k));
    int32_t* rs = reinterpret_cast<int32_t*>(base + i8_row_sum_offset(n_gemv, k));
    for (int64_t r = 0; r < n_gemv; ++r) {
      convert_to_f32(w_bf16.data() + r * k, DType::kBF16, row.data(), static_cast<size_t>(k));
      quantize_row_i8(row.data(), k, reinterpret_cast<int8_t*>(base) + r * k, sc + r, rs + r);
    }
  }
  const int64_t n_f32 = n_gemv / 2;
  std::vector<float> w_f32(static_cast<size_t>(n_f32 * k));
  convert_to_f32(w_bf16.data(), DType::kBF16, w_f32.data(), w_f32.size());
  std::vector<float> x(static_cast<size_t>(m_gemm * k));
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = static_cast<float>((i * 7919) % 1000) / 1000.0f - 0.5f;
  std::vector<float> y(static_cast<size_t>(std::max(n_gemv, m_gemm * n_gemm)));
  std::vector<uint64_t> bw_buf((static_cast<size_t>(o.gemv_mib) << 20) / 8, 1);

  for (int threads : o.threads) {
    ThreadPool bw_pool(threads);
    read_bandwidth(bw_pool, bw_buf, 1);  // first touch
    const double bw = read_bandwidth(bw_pool, bw_buf, o.reps);
    std::printf("RESULT threads=%d read_bandwidth GB/s=%.2f\n", threads, bw / 1e9);
    for (CpuIsa isa : tiers) {
      CpuBackend be(threads, isa);
      const std::string tier(cpu_isa_name(isa));
      auto gemv = [&](const char* what, DType dt, void* w, int64_t n) {
        Tensor xt(x.data(), DType::kF32, {1, k}), wt(w, dt, {n, k}),
            yt(y.data(), DType::kF32, {1, n});
        be.linear(xt, wt, Tensor(), yt);
        const double s = best_seconds(o.reps, [&] { be.linear(xt, wt, Tensor(), yt); });
        const double bytes = static_cast<double>(n * k) * static_cast<double>(dtype_size(dt));
        std::printf("RESULT threads=%d isa=%s gemv_%s GB/s=%.2f of_read_bw=%.0f%% ms=%.2f\n",
                    threads, tier.c_str(), what, bytes / s / 1e9, 100.0 * bytes / s / bw, s * 1e3);
      };
      gemv("bf16", DType::kBF16, w_bf16.data(), n_gemv);
      gemv("int8", DType::kI8, w_i8.data(), n_gemv);
      gemv("f32", DType::kF32, w_f32.data(), n_f32);
      auto gemm = [&](const char* what, DType dt, void* w) {
        Tensor xt(x.data(), DType::kF32, {m_gemm, k}), yt(y.data(), DType::kF32, {m_gemm, n_gemm});
        Tensor wt(w, dt, {n_gemm, k});
        be.linear(xt, wt, Tensor(), yt);
        const double s = best_seconds(o.reps, [&] { be.linear(xt, wt, Tensor(), yt); });
        std::printf("RESULT threads=%d isa=%s gemm_%s GFLOP/s=%.1f ms=%.2f\n", threads,
                    tier.c_str(), what, 2.0 * static_cast<double>(m_gemm * n_gemm * k) / s / 1e9,
                    s * 1e3);
      };
      gemm("bf16", DType::kBF16, w_bf16.data());
      // An int8 GEMM needs its own allocation layout ([n_gemm, k] with scales after the rows).
      std::vector<char> g_i8(i8_weight_bytes(n_gemm, k));
      std::memcpy(g_i8.data(), w_i8.data(), static_cast<size_t>(n_gemm * k));
      std::memcpy(g_i8.data() + i8_scale_offset(n_gemm, k),
                  w_i8.data() + i8_scale_offset(n_gemv, k), static_cast<size_t>(n_gemm) * 4);
      std::memcpy(g_i8.data() + i8_row_sum_offset(n_gemm, k),
                  w_i8.data() + i8_row_sum_offset(n_gemv, k), static_cast<size_t>(n_gemm) * 4);
      gemm("int8", DType::kI8, g_i8.data());
      gemm("f32", DType::kF32, w_f32.data());
      bench_attention(be, tier, threads, o.attn_context, o.reps);
    }
  }
  return 0;
}

}  // namespace

void add_bench_cpu(CLI::App* bench, int* exit_code) {
  auto* cmd = bench->add_subcommand("cpu",
                                    "CPU kernel benchmarks: read bandwidth, GEMV (decode) and GEMM "
                                    "(prefill) per kernel tier (RESULT lines)");
  auto o = std::make_shared<CpuBenchOptions>();
  cmd->add_option("--threads", o->threads, "Thread counts to measure")->capture_default_str();
  cmd->add_option("--isa", o->isa,
                  "Only this kernel tier (scalar, avx2, avx512, avx512_bf16, avx512_fp16)");
  cmd->add_option("--k", o->k, "Input features of the weight matrices")->capture_default_str();
  cmd->add_option("--gemv-mib", o->gemv_mib,
                  "Size of the GEMV weight matrix and bandwidth buffer (MiB)")
      ->capture_default_str();
  cmd->add_option("--attn-context", o->attn_context, "Keys of the decode attention benchmark")->capture_default_str();
  cmd->add_option("--reps", o->reps, "Repetitions (the best is reported)")->capture_default_str();
  cmd->callback([o, exit_code] {
    if (o->k <= 0 || o->gemv_mib <= 0 || o->reps <= 0 || o->threads.empty() || o->attn_context <= 0 ||
        o->attn_context > INT32_MAX) {
      std::fprintf(stderr,
                   "ridgeline: error: --k, --gemv-mib, --attn-context, --reps and --threads must be positive\n");
      *exit_code = 1;
      return;
    }
    *exit_code = run(*o);
  });
}

}  // namespace rl::cli
