// Kernel benchmarks of the CUDA backend at real model shapes: GEMV/GEMM (linear), split-KV decode attention,
// FA2 prefill attention, MLA, the sampler, and a device-to-device copy for the bandwidth ceiling. CUDA events
// around each op, warm-up, median of many repetitions, and inputs rotated over several copies when one copy would
// fit in L2 (60 MB). Prints `RESULT <kernel> <shape> <value> <unit>` lines; bench/peers/report.py builds the table.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <numeric>
#include <string>
#include <vector>

#include <xxhash.h>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/gemm_lt.h"
#include "backend/cuda/kernel_bench.h"
#include "backend/cuda/kernel_config.h"
#include "backend/cuda/mla_kernels.h"
#include "core/random.h"

namespace rl {
namespace {

constexpr size_t kL2Rotate = size_t(256) << 20;  // rotate inputs until this many bytes are touched

// Median milliseconds of fn(i) over reps synchronized runs after 3 warm-ups, i = repetition index (for rotation);
// sorted, the reps' times go to *all if given.
double time_ms(CudaBackend& be, const std::function<void(int)>& fn, int reps = 30, std::vector<float>* all = nullptr) {
  cudaEvent_t start, stop;
  RL_CUDA_CHECK(cudaEventCreate(&start));
  RL_CUDA_CHECK(cudaEventCreate(&stop));
  for (int i = 0; i < 3; ++i) fn(i);
  std::vector<float> t;
  for (int i = 0; i < reps; ++i) {
    RL_CUDA_CHECK(cudaEventRecord(start, be.stream()));
    fn(i);
    RL_CUDA_CHECK(cudaEventRecord(stop, be.stream()));
    RL_CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0;
    RL_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    t.push_back(ms);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  std::sort(t.begin(), t.end());
  if (all != nullptr) *all = t;
  return t[t.size() / 2];
}

// Median milliseconds per launch of fn(0) .. fn(launches - 1) captured in one CUDA graph and replayed, as a decode
// step's graph runs its kernels: graph launches cost less than stream launches, and programmatic dependent launch
// is kept as graph edges, so a kernel's prologue overlaps its predecessor's tail.
double graph_ms_per_launch(CudaBackend& be, int launches, const std::function<void(int)>& fn) {
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  RL_CUDA_CHECK(cudaStreamBeginCapture(be.stream(), cudaStreamCaptureModeThreadLocal));
  for (int j = 0; j < launches; ++j) fn(j);
  RL_CUDA_CHECK(cudaStreamEndCapture(be.stream(), &graph));
  RL_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  const double ms = time_ms(be, [&](int) { RL_CUDA_CHECK(cudaGraphLaunch(exec, be.stream())); }, 20) / launches;
  RL_CUDA_CHECK(cudaGraphExecDestroy(exec));
  RL_CUDA_CHECK(cudaGraphDestroy(graph));
  return ms;
}

void result(const char* kernel, const std::string& shape, double value, const char* unit) {
  std::printf("RESULT %s %s %.4g %s\n", kernel, shape.c_str(), value, unit);
  std::fflush(stdout);
}

// A launch's output bits as one XXH3-64 word, printed beside its row: two builds whose forms claim the same bits show
// the same word for the same row (the inputs are filled from fixed seeds).
void print_output_hash(CudaBackend& be, const std::string& name, const Tensor& out) {
  std::vector<uint8_t> host(out.nbytes());
  be.download(host.data(), out.data, host.size());
  std::printf("# output %s: XXH3 %016llx over %zu bytes\n", name.c_str(),
              static_cast<unsigned long long>(XXH3_64bits(host.data(), host.size())), host.size());
}

void bench_copy(CudaBackend& be) {
  const size_t n = size_t(2) << 30;
  DeviceBuffer a(&be, n), b(&be, n);
  be.fill_uniform(Tensor(a.data(), DType::kBF16, {static_cast<int64_t>(n / 2)}), 1, -1, 1);
  const double ms = time_ms(be, [&](int) {
    RL_CUDA_CHECK(cudaMemcpyAsync(b.data(), a.data(), n, cudaMemcpyDeviceToDevice, be.stream()));
  });
  result("copy", "2GiB", 2.0 * n / (ms * 1e-3) / 1e12, "TB/s");
}

// Enough copies of an [n, k] bf16 weight (uniform in ±0.05, seeds seed, seed + 1, ...) that rotating through them
// touches more than kL2Rotate bytes, so no timed call finds its weights in L2.
std::vector<DeviceBuffer> rotated_weights(CudaBackend& be, int64_t n, int64_t k, uint64_t seed) {
  const size_t w_bytes = static_cast<size_t>(n * k * 2);
  const int copies = static_cast<int>(std::max<size_t>(1, kL2Rotate / w_bytes + 1));
  std::vector<DeviceBuffer> ws;
  for (int c = 0; c < copies; ++c) {
    ws.emplace_back(&be, w_bytes);
    be.fill_uniform(Tensor(ws.back().data(), DType::kBF16, {n, k}), seed + static_cast<uint64_t>(c), -0.05f, 0.05f);
  }
  return ws;
}

void bench_linear(CudaBackend& be) {
  const int64_t n = 14336, k = 4096;
  const size_t w_bytes = static_cast<size_t>(n * k * 2);
  const std::vector<DeviceBuffer> ws = rotated_weights(be, n, k, 10);
  const int copies = static_cast<int>(ws.size());
  // Default kernels, then the batch-invariant family (deterministic mode) at the same shapes; M = 4096 (a prefill
  // chunk) is compute-bound and reported in TFLOP/s.
  for (bool det : {false, true}) {
    be.set_deterministic(det);
    for (int64_t m : {1, 16, 32, 64, 256, 4096}) {
      DeviceBuffer x(&be, static_cast<size_t>(m * k * 2)), y(&be, static_cast<size_t>(m * n * 2));
      be.fill_uniform(Tensor(x.data(), DType::kBF16, {m, k}), 3, -1, 1);
      const double ms = time_ms(be, [&](int i) {
        be.linear(Tensor(x.data(), DType::kBF16, {m, k}), Tensor(ws[i % copies].data(), DType::kBF16, {n, k}),
                  Tensor(), Tensor(y.data(), DType::kBF16, {m, n}));
      });
      const std::string name = det ? "linear_det" : "linear", shape = "m" + std::to_string(m) + "_4096x14336";
      if (m >= 4096) {
        result((name + "_tf").c_str(), shape, 2.0 * m * n * k / (ms * 1e-3) / 1e12, "TFLOP/s");
      } else {
        result(name.c_str(), shape, w_bytes / (ms * 1e-3) / 1e12, "TB/s");
      }
    }
  }
  be.set_deterministic(false);
  // Kernel lab: the invariant GEMM's tile configurations (kernel_config.h) at the M they serve.
  for (int64_t m : {1, 8, 16, 32, 64, 256, 4096}) {
    DeviceBuffer x(&be, static_cast<size_t>(m * k * 2)), y(&be, static_cast<size_t>(m * n * 2));
    be.fill_uniform(Tensor(x.data(), DType::kBF16, {m, k}), 3, -1, 1);
    for (int config = 1; config <= 9; ++config) {
      const bool big_config = config == 5 || config == 8 || config == 9;
      if ((m > 64) != big_config) continue;
      const double ms = time_ms(be, [&](int i) {
        cuda::launch_gemm_invariant_lab(static_cast<const uint16_t*>(x.data()),
                                        static_cast<const uint16_t*>(ws[i % copies].data()), nullptr, DType::kBF16,
                                        y.data(), DType::kBF16, m, n, k, be.stream(), config);
      });
      const std::string shape = "c" + std::to_string(config) + "_m" + std::to_string(m);
      if (m > 64) {
        result("inv_gemm_lab", shape, 2.0 * m * n * k / (ms * 1e-3) / 1e12, "TFLOP/s");
      } else {
        result("inv_gemm_lab", shape, w_bytes / (ms * 1e-3) / 1e12, "TB/s");
      }
    }
  }
}

// The skinny GEMM (gemm_skinny_sm90.cu) at the decode batches it serves (M = 17..64) and at M = 16, next to
// cuBLASLt (what served M > 16 before it) and the GEMV in the same run, weight bytes / time, on the projection
// shapes of Llama-3.1-8B and Qwen3-0.6B; then the kernel lab's stages × splits sweep.
void bench_skinny(CudaBackend& be) {
  struct Shape {
    int64_t k, n;
  };
  const Shape shapes[] = {{4096, 6144}, {4096, 4096}, {4096, 28672}, {14336, 4096}, {4096, 14336}, {4096, 128256},
                          {1024, 4096}, {2048, 1024}, {1024, 6144},  {3072, 1024}};
  for (const Shape& s : shapes) {
    const size_t w_bytes = static_cast<size_t>(s.n * s.k * 2);
    const std::vector<DeviceBuffer> ws = rotated_weights(be, s.n, s.k, 30);
    const int copies = static_cast<int>(ws.size());
    const std::string dims = std::to_string(s.k) + "x" + std::to_string(s.n);
    for (int64_t m : {16, 32, 64}) {
      DeviceBuffer x(&be, static_cast<size_t>(m * s.k * 2)), y(&be, static_cast<size_t>(m * s.n * 2));
      be.fill_uniform(Tensor(x.data(), DType::kBF16, {m, s.k}), 3, -1, 1);
      auto timed = [&](const std::function<void(const void*)>& fn) {
        return time_ms(be, [&](int i) { fn(ws[i % copies].data()); }, 50);
      };
      auto skinny = [&](int stages, int splits) {
        return timed([&](const void* w) {
          cuda::launch_skinny_gemm_lab(static_cast<const uint16_t*>(x.data()), static_cast<const uint16_t*>(w),
                                       nullptr, DType::kBF16, y.data(), DType::kBF16, m, s.n, s.k,
                                       be.skinny_workspace(), be.num_sms(), be.stream(),
                                       cuda::SkinnyLab{stages, splits});
        });
      };
      auto report = [&](const char* kernel, const std::string& shape, double ms) {
        result(kernel, shape, w_bytes / (ms * 1e-3) / 1e12, "TB/s");
      };
      const std::string shape = "m" + std::to_string(m) + "_" + dims;
      report("skinny", shape, skinny(0, 0));
      be.set_skinny_gemm_use(cuda::SkinnyGemmUse::kOff);
      report("cublaslt", shape, timed([&](const void* w) {
               be.linear(Tensor(x.data(), DType::kBF16, {m, s.k}), Tensor(const_cast<void*>(w), DType::kBF16, {s.n, s.k}),
                         Tensor(), Tensor(y.data(), DType::kBF16, {m, s.n}));
             }));
      if (m > cuda::kGemvMaxM) {
        // The same after tuning (gemm_lt.cpp): the shape's first call with tuning on keeps the fastest candidate.
        be.lt_gemm().set_tuning(true);
        be.linear(Tensor(x.data(), DType::kBF16, {m, s.k}), Tensor(ws[0].data(), DType::kBF16, {s.n, s.k}),
                  Tensor(), Tensor(y.data(), DType::kBF16, {m, s.n}));
        be.lt_gemm().set_tuning(false);
        const int kept = be.lt_gemm().report(m, s.n, s.k, DType::kBF16).chosen;
        report("cublaslt_tuned", shape + "_a" + std::to_string(kept), timed([&](const void* w) {
                 be.linear(Tensor(x.data(), DType::kBF16, {m, s.k}),
                           Tensor(const_cast<void*>(w), DType::kBF16, {s.n, s.k}), Tensor(),
                           Tensor(y.data(), DType::kBF16, {m, s.n}));
               }));
      }
      if (m == 16) {
        report("gemv", shape, timed([&](const void* w) {
                 cuda::launch_gemv(static_cast<const uint16_t*>(x.data()), static_cast<const uint16_t*>(w), nullptr,
                                   DType::kBF16, y.data(), DType::kBF16, m, s.n, s.k, be.stream());
               }));
      }
      if (m != 64) continue;
      for (int stages : {4, 8}) {
        for (int splits : {1, 2, 3, 4, 6, 8}) {
          report("skinny_lab", shape + "_st" + std::to_string(stages) + "_sp" + std::to_string(splits),
                 skinny(stages, splits));
        }
      }
    }
  }
}

// The projection shapes of Llama-3.1-8B and Qwen3-0.6B (K → N; the LM heads included) at M = 1 and 16: the
// production GEMV (variant 0) next to v2 (variant 1) and v3 without split-K (variant 14), weight bytes / time.
void bench_gemv_shapes(CudaBackend& be) {
  struct Shape {
    int64_t k, n;
  };
  const Shape shapes[] = {{4096, 4096},  {4096, 1024}, {4096, 6144}, {4096, 14336}, {4096, 28672}, {14336, 4096},
                          {4096, 128256}, {1024, 2048}, {1024, 1024}, {1024, 4096},  {1024, 3072},  {1024, 6144},
                          {2048, 1024},  {3072, 1024}, {1024, 151936}};
  for (const Shape& s : shapes) {
    const size_t w_bytes = static_cast<size_t>(s.n * s.k * 2);
    const std::vector<DeviceBuffer> ws = rotated_weights(be, s.n, s.k, 20);
    const int copies = static_cast<int>(ws.size());
    for (int64_t m : {1, 16}) {
      DeviceBuffer x(&be, static_cast<size_t>(m * s.k * 2)), y(&be, static_cast<size_t>(m * s.n * 2));
      be.fill_uniform(Tensor(x.data(), DType::kBF16, {m, s.k}), 3, -1, 1);
      for (int variant : {0, 1, 14}) {
        const double ms = time_ms(be, [&](int i) {
          cuda::launch_gemv_lab(static_cast<const uint16_t*>(x.data()),
                                static_cast<const uint16_t*>(ws[i % copies].data()), nullptr, DType::kBF16, y.data(),
                                DType::kBF16, m, s.n, s.k, be.stream(), variant);
        }, 50);
        result(variant == 0 ? "gemv" : variant == 1 ? "gemv_v2" : "gemv_nosplit",
               "m" + std::to_string(m) + "_" + std::to_string(s.k) + "x" + std::to_string(s.n),
               w_bytes / (ms * 1e-3) / 1e12, "TB/s");
      }
      // The production GEMV in one CUDA graph, each launch on the next copy of the weights (at least 20, and every
      // copy once, so the replays stream from HBM): how it streams inside a decode step, where each launch's first
      // weight stages are requested before the previous kernel ends (issue 21.3 measures this rate).
      const double graph_ms = graph_ms_per_launch(be, std::max(20, copies), [&](int j) {
        cuda::launch_gemv(static_cast<const uint16_t*>(x.data()), static_cast<const uint16_t*>(ws[j % copies].data()),
                          nullptr, DType::kBF16, y.data(), DType::kBF16, m, s.n, s.k, be.stream());
      });
      result("gemv_graph", "m" + std::to_string(m) + "_" + std::to_string(s.k) + "x" + std::to_string(s.n),
             w_bytes / (graph_ms * 1e-3) / 1e12, "TB/s");
    }
  }
  // The gated MLP's gate_up projection with SiLU·mul fused (launch_gemv_silu_mul; weight bytes / time).
  for (const Shape& s : {Shape{4096, 14336}, Shape{1024, 3072}}) {
    const size_t w_bytes = static_cast<size_t>(2 * s.n * s.k * 2);
    const std::vector<DeviceBuffer> ws = rotated_weights(be, 2 * s.n, s.k, 40);
    const int copies = static_cast<int>(ws.size());
    for (int64_t m : {1, 16}) {
      DeviceBuffer x(&be, static_cast<size_t>(m * s.k * 2)), y(&be, static_cast<size_t>(m * s.n * 2));
      be.fill_uniform(Tensor(x.data(), DType::kBF16, {m, s.k}), 3, -1, 1);
      const double ms = time_ms(be, [&](int i) {
        cuda::launch_gemv_silu_mul(static_cast<const uint16_t*>(x.data()),
                                   static_cast<const uint16_t*>(ws[i % copies].data()), nullptr, DType::kBF16, y.data(),
                                   DType::kBF16, m, s.n, s.k, be.stream());
      }, 50);
      result("gemv_silu", "m" + std::to_string(m) + "_" + std::to_string(s.k) + "x2x" + std::to_string(s.n),
             w_bytes / (ms * 1e-3) / 1e12, "TB/s");
    }
  }
  // Kernel lab: the GEMV kernels side by side (launch_gemv variants: v2 1-3, streaming v3 10-19, i.e. the
  // configurations of gemv_stream.cu's launch_nt 0-9) at 4096 → 14336 for M = 1 … 64, and at the mid-size and small
  // projections (where the production configuration streams furthest below the copy ceiling) for M = 1 and 16.
  struct LabShape {
    int64_t k, n;
    std::vector<int64_t> ms;
  };
  const LabShape lab[] = {{4096, 14336, {1, 2, 4, 8, 16, 32, 64}},
                          {4096, 4096, {1, 16}},
                          {4096, 6144, {1, 16}},
                          {14336, 4096, {1, 16}},
                          {1024, 4096, {1}},
                          {2048, 1024, {1}},
                          {3072, 1024, {1}},
                          {4096, 28672, {1}},
                          {4096, 128256, {1}}};
  for (const LabShape& ls : lab) {
    const size_t w_bytes = static_cast<size_t>(ls.n * ls.k * 2);
    const std::vector<DeviceBuffer> ws = rotated_weights(be, ls.n, ls.k, 10);
    const int copies = static_cast<int>(ws.size());
    for (int64_t m : ls.ms) {
      DeviceBuffer x(&be, static_cast<size_t>(m * ls.k * 2)), y(&be, static_cast<size_t>(m * ls.n * 2));
      be.fill_uniform(Tensor(x.data(), DType::kBF16, {m, ls.k}), 3, -1, 1);
      for (int variant : {1, 2, 3, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19}) {
        if (variant <= 3 && m > 16) continue;
        const double ms = time_ms(be, [&](int i) {
          cuda::launch_gemv_lab(static_cast<const uint16_t*>(x.data()),
                                static_cast<const uint16_t*>(ws[i % copies].data()), nullptr, DType::kBF16, y.data(),
                                DType::kBF16, m, ls.n, ls.k, be.stream(), variant);
        }, 50);
        const std::string shape = ls.k == 4096 && ls.n == 14336
                                      ? "v" + std::to_string(variant) + "_m" + std::to_string(m)
                                      : "v" + std::to_string(variant) + "_m" + std::to_string(m) + "_" +
                                            std::to_string(ls.k) + "x" + std::to_string(ls.n);
        result("gemv_lab", shape, w_bytes / (ms * 1e-3) / 1e12, "TB/s");
      }
    }
  }
}

// One attention problem: B sequences, q_len new tokens each, context ctx; contiguous block tables per copy.
struct AttnProblem {
  std::vector<DeviceBuffer> keep;
  std::vector<AttentionMetadata> metas;  // one per rotation copy
  KvLayer cache;
  Tensor qkv, out;
};

// One sequence of an attention problem: q_len new tokens, ctx keys in all.
struct SeqShape {
  int64_t q_len, ctx;
};

// An FP8 e4m3 tensor filled with the codes of uniform values in [-1, 1]: 1 MiB of them made on the host, repeated
// over the tensor by doubling device copies (the bandwidth rows need no fresh bytes everywhere, only no NaN code).
void fill_fp8(CudaBackend& be, const Tensor& t, uint64_t seed) {
  const size_t n = t.nbytes(), chunk = std::min(n, size_t(1) << 20);
  std::vector<uint8_t> codes(chunk);
  for (size_t i = 0; i < chunk; ++i) codes[i] = f32_to_fp8_e4m3(2.0f * uniform_from_counter(seed, i) - 1.0f);
  be.upload(t.data, codes.data(), chunk);
  auto* base = static_cast<uint8_t*>(t.data);
  for (size_t done = chunk; done < n; done *= 2) {
    RL_CUDA_CHECK(cudaMemcpy(base + done, base, std::min(done, n - done), cudaMemcpyDeviceToDevice));
  }
}

// Sequences' pages laid out one after another in each rotation copy's range of the cache (block 0 never used).
// kv_dt: bf16, or fp8 (e4m3) for the FP8 cache's rows.
AttnProblem make_attn_seqs(CudaBackend& be, const std::vector<SeqShape>& seqs, int64_t heads, int64_t kv_heads,
                           int64_t d, int copies, int64_t bs = 16, DType kv_dt = DType::kBF16) {
  AttnProblem p;
  const int64_t b = static_cast<int64_t>(seqs.size());
  int64_t tokens = 0, max_pages = 1, total_pages = 0, max_q = 0, max_k = 0;
  std::vector<int32_t> cu(b + 1, 0), lens(b);
  std::vector<int64_t> first_page(b);
  for (int64_t s = 0; s < b; ++s) {
    const int64_t pages = (seqs[s].ctx + bs - 1) / bs;
    first_page[s] = total_pages;
    total_pages += pages;
    max_pages = std::max(max_pages, pages);
    tokens += seqs[s].q_len;
    cu[s + 1] = static_cast<int32_t>(tokens);
    lens[s] = static_cast<int32_t>(seqs[s].ctx);
    max_q = std::max(max_q, seqs[s].q_len);
    max_k = std::max(max_k, seqs[s].ctx);
  }
  const int64_t num_blocks = 1 + copies * total_pages;
  const QkvLayout l{heads, kv_heads, d};
  auto alloc = [&](DType dt, std::initializer_list<int64_t> dims) {
    Tensor t(nullptr, dt, dims);
    p.keep.emplace_back(&be, t.nbytes());
    t.data = p.keep.back().data();
    return t;
  };
  p.cache.k = alloc(kv_dt, {num_blocks, bs, kv_heads, d});
  p.cache.v = alloc(kv_dt, {num_blocks, bs, kv_heads, d});
  if (kv_dt == DType::kFP8E4M3) {
    fill_fp8(be, p.cache.k, 5);
    fill_fp8(be, p.cache.v, 6);
  } else {
    be.fill_uniform(p.cache.k, 5, -1, 1);
    be.fill_uniform(p.cache.v, 6, -1, 1);
  }
  p.qkv = alloc(DType::kBF16, {tokens, l.row()});
  be.fill_uniform(p.qkv, 7, -1, 1);
  p.out = alloc(DType::kBF16, {tokens, heads * d});
  for (int c = 0; c < copies; ++c) {
    std::vector<int32_t> table(b * max_pages, 0);
    for (int64_t s = 0; s < b; ++s) {
      for (int64_t j = 0; j < (seqs[s].ctx + bs - 1) / bs; ++j) {
        table[s * max_pages + j] = static_cast<int32_t>(1 + c * total_pages + first_page[s] + j);
      }
    }
    AttentionMetadata m;
    m.cu_seqlens_q = alloc(DType::kI32, {b + 1});
    m.seq_lens_k = alloc(DType::kI32, {b});
    m.block_tables = alloc(DType::kI32, {b, max_pages});
    be.upload(m.cu_seqlens_q.data, cu.data(), cu.size() * 4);
    be.upload(m.seq_lens_k.data, lens.data(), lens.size() * 4);
    be.upload(m.block_tables.data, table.data(), table.size() * 4);
    m.num_seqs = b;
    m.max_seqlen_q = max_q;
    m.max_seqlen_k = max_k;
    m.all_decode = max_q == 1;
    m.layout = l;
    m.scale = 1.0f / std::sqrt(static_cast<float>(d));
    p.metas.push_back(m);
  }
  return p;
}

AttnProblem make_attn(CudaBackend& be, int64_t b, int64_t q_len, int64_t ctx, int64_t heads, int64_t kv_heads,
                      int64_t d, int copies, int64_t bs = 16, DType kv_dt = DType::kBF16) {
  return make_attn_seqs(be, std::vector<SeqShape>(static_cast<size_t>(b), SeqShape{q_len, ctx}), heads, kv_heads, d,
                        copies, bs, kv_dt);
}

// The kernel arguments of an attention problem (b sequences of q_len new tokens, a grid sized for max_ctx keys)
// for the direct launches of the lab.
cuda::AttentionArgs attn_args(const AttnProblem& p, const AttentionMetadata& m, int64_t b, int64_t q_len,
                              int64_t max_ctx, int64_t heads, int64_t kv_heads, int64_t d) {
  cuda::AttentionArgs a;
  a.qkv = static_cast<const uint16_t*>(p.qkv.data);
  a.k_cache = static_cast<const uint16_t*>(p.cache.k.data);
  a.v_cache = static_cast<const uint16_t*>(p.cache.v.data);
  a.cu_seqlens_q = m.cu_seqlens_q.as<int32_t>();
  a.seq_lens_k = m.seq_lens_k.as<int32_t>();
  a.block_tables = m.block_tables.as<int32_t>();
  a.out = static_cast<uint16_t*>(p.out.data);
  a.num_tokens = b * q_len;
  a.num_seqs = b;
  a.max_seqlen_q = q_len;
  a.max_seqlen_k = max_ctx;
  a.max_blocks = m.block_tables.dim(1);
  a.num_heads = heads;
  a.num_kv_heads = kv_heads;
  a.head_dim = d;
  a.block_size = p.cache.k.dim(1);
  a.kv_slots = p.cache.k.dim(0) * a.block_size;
  a.row = (heads + 2 * kv_heads) * d;
  a.scale = m.scale;
  a.kv_fp8 = p.cache.k.dtype == DType::kFP8E4M3;
  return a;
}

__global__ void empty_kernel() {}

const std::vector<std::pair<std::string, cuda::DecodeKernel>> kDecodeKernels = {
    {"simt", cuda::DecodeKernel::kSimt}, {"mma", cuda::DecodeKernel::kMma},
    {"mma_prefetch", cuda::DecodeKernel::kMmaPrefetch}, {"mma_early", cuda::DecodeKernel::kMmaEarly},
    {"staged", cuda::DecodeKernel::kStaged}, {"staged_cluster", cuda::DecodeKernel::kStagedCluster}};

void bench_decode(CudaBackend& be) {
  const int64_t heads = 32, kv_heads = 8, d = 128;
  // What a lone launch between two events costs with no work at all: the floor under every per-launch figure.
  const double empty_ms = time_ms(be, [&](int) { empty_kernel<<<1, 32, 0, be.stream()>>>(); }, 50);
  result("launch_floor", "empty_kernel", empty_ms * 1e3, "us");
  // Per launch of 20 empty kernels in one CUDA graph: the floor under the *_graph rows.
  result("launch_floor", "empty_kernel_in_graph",
         graph_ms_per_launch(be, 20, [&](int) { empty_kernel<<<1, 32, 0, be.stream()>>>(); }) * 1e3, "us");
  for (const auto& shape : std::vector<std::pair<int64_t, int64_t>>{{1, 4096}, {64, 4096}, {16, 32768}}) {
    const int64_t b = shape.first, ctx = shape.second;
    const size_t kv_bytes = static_cast<size_t>(b * ctx * kv_heads * d * 2 * 2);
    const int copies = static_cast<int>(std::max<size_t>(1, kL2Rotate / kv_bytes + 1));
    AttnProblem p = make_attn(be, b, 1, ctx, heads, kv_heads, d, copies);
    for (bool det : {false, true}) {
      be.set_deterministic(det);
      const double ms = time_ms(be, [&](int i) { be.attention(p.qkv, p.cache, p.metas[i % copies], p.out); }, 50);
      result(det ? "decode_attn_det" : "decode_attn", "B" + std::to_string(b) + "_S" + std::to_string(ctx) + "_h32kv8d128",
             kv_bytes / (ms * 1e-3) / 1e12, "TB/s");
    }
    be.set_deterministic(false);  // the rows below time the production kernel (before session 16 they ran in
                                  // deterministic mode: the batch-invariant attention)
    // The same kernel 20 times back to back between the events (as a decode graph runs one layer's attention
    // after another's, each launch overlapping its predecessor's end through programmatic dependent launch): the
    // per-launch time without the event pair's fixed cost that a lone launch pays.
    {
      constexpr int kBackToBack = 20;
      const double ms = time_ms(be, [&](int i) {
        for (int j = 0; j < kBackToBack; ++j) be.attention(p.qkv, p.cache, p.metas[(i * kBackToBack + j) % copies], p.out);
      }, 20) / kBackToBack;
      result("decode_attn_b2b", "B" + std::to_string(b) + "_S" + std::to_string(ctx) + "_h32kv8d128",
             kv_bytes / (ms * 1e-3) / 1e12, "TB/s");
      result("decode_attn_b2b_us", "B" + std::to_string(b) + "_S" + std::to_string(ctx), ms * 1e3, "us");
    }
    // The same 20 launches in one CUDA graph (graph_ms_per_launch), as a decode step's graph runs them.
    {
      const double ms =
          graph_ms_per_launch(be, 20, [&](int j) { be.attention(p.qkv, p.cache, p.metas[j % copies], p.out); });
      result("decode_attn_graph", "B" + std::to_string(b) + "_S" + std::to_string(ctx) + "_h32kv8d128",
             kv_bytes / (ms * 1e-3) / 1e12, "TB/s");
      result("decode_attn_graph_us", "B" + std::to_string(b) + "_S" + std::to_string(ctx), ms * 1e3, "us");
    }
    // The same shape over an FP8 e4m3 cache (half the bytes; TB/s of the fp8 bytes read), production dispatch, a lone
    // launch and 20 in a graph.
    {
      const size_t fp8_bytes = kv_bytes / 2;
      const int fp8_copies = static_cast<int>(std::max<size_t>(1, kL2Rotate / fp8_bytes + 1));
      AttnProblem f = make_attn(be, b, 1, ctx, heads, kv_heads, d, fp8_copies, 16, DType::kFP8E4M3);
      const std::string shape = "B" + std::to_string(b) + "_S" + std::to_string(ctx) + "_h32kv8d128";
      const double ms = time_ms(be, [&](int i) { be.attention(f.qkv, f.cache, f.metas[i % fp8_copies], f.out); }, 50);
      result("decode_attn_fp8", shape, fp8_bytes / (ms * 1e-3) / 1e12, "TB/s");
      const double g_ms =
          graph_ms_per_launch(be, 20, [&](int j) { be.attention(f.qkv, f.cache, f.metas[j % fp8_copies], f.out); });
      result("decode_attn_graph_fp8", shape, fp8_bytes / (g_ms * 1e-3) / 1e12, "TB/s");
      result("decode_attn_graph_fp8_us", "B" + std::to_string(b) + "_S" + std::to_string(ctx), g_ms * 1e3, "us");
      // The plain tensor-core walk and the staged kernel forced (production takes one of them by the batch).
      DeviceBuffer fp8_partials(&be, size_t(1) << 26), fp8_counters(&be, size_t(1) << 20);
      be.fill_zero(fp8_counters.data(), size_t(1) << 20);
      const int64_t rows = (int64_t(1) << 26) / 4 / (d + 1);
      const cuda::DecodeWorkspace fws{static_cast<float*>(fp8_partials.data()),
                                      static_cast<float*>(fp8_partials.data()) + rows * d,
                                      static_cast<int*>(fp8_counters.data()), rows};
      for (const auto& k : {std::make_pair(std::string("mma"), cuda::DecodeKernel::kMma),
                            std::make_pair(std::string("staged"), cuda::DecodeKernel::kStaged),
                            std::make_pair(std::string("staged_cluster"), cuda::DecodeKernel::kStagedCluster)}) {
        const double k_ms = graph_ms_per_launch(be, 20, [&](int j) {
          cuda::launch_decode_attention_lab(attn_args(f, f.metas[j % fp8_copies], b, 1, ctx, heads, kv_heads, d), fws,
                                            be.num_sms(), be.stream(), {0, 0, k.second});
        });
        result("decode_kernel_graph_fp8_us", "B" + std::to_string(b) + "_S" + std::to_string(ctx) + "_" + k.first,
               k_ms * 1e3, "us");
      }
    }
    // Kernel lab: split slots (own workspace); at B = 1 also a grid sized for a 128k context (as a CUDA graph
    // captured at max_model_len launches it) serving this 4k one.
    DeviceBuffer partials(&be, size_t(1) << 26), counters(&be, size_t(1) << 20);
    be.fill_zero(counters.data(), size_t(1) << 20);
    const int64_t rows = (int64_t(1) << 26) / 4 / (d + 1);
    cuda::DecodeWorkspace ws{static_cast<float*>(partials.data()), static_cast<float*>(partials.data()) + rows * d,
                             static_cast<int*>(counters.data()), rows};
    // Each kernel at the production split count, and 20 launches in one CUDA graph: a lone launch has no kernel
    // before it, so what a kernel does before its PDL wait (mma_early's first page) overlaps nothing there.
    for (const auto& k : kDecodeKernels) {
      auto launch = [&](int i) {
        cuda::launch_decode_attention_lab(attn_args(p, p.metas[i % copies], b, 1, ctx, heads, kv_heads, d), ws,
                                          be.num_sms(), be.stream(), {0, 0, k.second});
      };
      const std::string shape = "B" + std::to_string(b) + "_S" + std::to_string(ctx) + "_" + k.first;
      result("decode_kernel", shape, kv_bytes / (time_ms(be, launch, 50) * 1e-3) / 1e12, "TB/s");
      const double g_ms = graph_ms_per_launch(be, 20, launch);
      result("decode_kernel_graph", shape, kv_bytes / (g_ms * 1e-3) / 1e12, "TB/s");
      result("decode_kernel_graph_us", shape, g_ms * 1e3, "us");
    }
    const std::vector<int64_t> split_list =
        b == 1 ? std::vector<int64_t>{16, 32, 64, 128, 256} : std::vector<int64_t>{1, 2, 3, 4, 6, 8};
    for (int64_t splits : split_list) {
      if (b * heads * splits > rows) continue;
      const double lab_ms = time_ms(be, [&](int i) {
        cuda::launch_decode_attention_lab(attn_args(p, p.metas[i % copies], b, 1, ctx, heads, kv_heads, d), ws,
                                          be.num_sms(), be.stream(), {splits, 0, cuda::DecodeKernel::kAuto});
      }, 50);
      result("decode_lab", "B" + std::to_string(b) + "_S" + std::to_string(ctx) + "_splits" + std::to_string(splits),
             kv_bytes / (lab_ms * 1e-3) / 1e12, "TB/s");
    }
    if (b == 64) {
      // Batch 64 at short and mid contexts under the grid a 4k max_model_len sizes (as a captured decode graph
      // runs them: the split count of a 4k context), one page per warp (production) against two and four: where
      // a batch-64 decode step's attention grows with the context (docs/cuda.md).
      for (int64_t short_ctx : {80, 192, 512}) {
        const size_t short_bytes = static_cast<size_t>(b * short_ctx * kv_heads * d * 2 * 2);
        const int short_copies = static_cast<int>(kL2Rotate / short_bytes + 1);
        AttnProblem sp = make_attn(be, b, 1, short_ctx, heads, kv_heads, d, short_copies);
        for (const auto& k : kDecodeKernels) {
          for (int min_pages : {4, 16}) {
            const double sms = time_ms(be, [&](int i) {
              const cuda::AttentionArgs a = attn_args(sp, sp.metas[i % short_copies], b, 1, 4096, heads, kv_heads, d);
              cuda::launch_decode_attention_lab(a, ws, be.num_sms(), be.stream(), {0, min_pages, k.second});
            }, 50);
            const std::string shape = "B64_S" + std::to_string(short_ctx) + "_grid_for_4k_minpages" +
                                      std::to_string(min_pages) + "_" + k.first;
            result("decode_lab", shape, short_bytes / (sms * 1e-3) / 1e12, "TB/s");
            result("decode_lab_us", shape, sms * 1e3, "us");
          }
        }
        // The tensor-core kernel with more split slots than the 4k grid's one: at these lengths a sequence then
        // spreads its pages over up to `slots` blocks (one page per warp at least), so each warp has fewer pages
        // to load one after another, and the blocks merge across the split. Whether a graph should carry more
        // slots for short contexts (unused slots exit at once) is what these rows decide, with the 4k rows above
        // (decode_lab B64_S4096_splitsN) for what extra slots cost a long context.
        for (int64_t slots : {1, 2, 3, 4, 8}) {
          const double sms = time_ms(be, [&](int i) {
            const cuda::AttentionArgs a = attn_args(sp, sp.metas[i % short_copies], b, 1, 4096, heads, kv_heads, d);
            cuda::launch_decode_attention_lab(a, ws, be.num_sms(), be.stream(), {slots, 0, cuda::DecodeKernel::kMma});
          }, 50);
          const std::string shape = "B64_S" + std::to_string(short_ctx) + "_slots" + std::to_string(slots) + "_mma";
          result("decode_lab", shape, short_bytes / (sms * 1e-3) / 1e12, "TB/s");
          result("decode_lab_us", shape, sms * 1e3, "us");
        }
      }
    }
    if (b != 1) continue;
    // Short contexts under the grid a 4k max_model_len sizes (32 split slots, as a captured decode graph runs
    // them): pages per split at least 4 (one per warp, production) against at least 8 (two per warp).
    for (int64_t short_ctx : {256, 1024}) {
      const size_t short_bytes = static_cast<size_t>(short_ctx * kv_heads * d * 2 * 2);
      const int short_copies = static_cast<int>(kL2Rotate / short_bytes + 1);
      AttnProblem sp = make_attn(be, 1, 1, short_ctx, heads, kv_heads, d, short_copies);
      for (int min_pages : {4, 8}) {
        const double sms = time_ms(be, [&](int i) {
          cuda::launch_decode_attention_lab(attn_args(sp, sp.metas[i % short_copies], 1, 1, 4096, heads, kv_heads, d),
                                            ws, be.num_sms(), be.stream(), {32, min_pages, cuda::DecodeKernel::kAuto});
        }, 50);
        result("decode_lab", "B1_S" + std::to_string(short_ctx) + "_grid_for_4k_minpages" + std::to_string(min_pages),
               sms * 1e3, "us");
      }
    }
    AttentionMetadata long_meta = p.metas[0];
    long_meta.max_seqlen_k = 131072;
    const double long_ms = time_ms(be, [&](int) { be.attention(p.qkv, p.cache, long_meta, p.out); }, 50);
    result("decode_lab", "B1_S4096_grid_for_128k", kv_bytes / (long_ms * 1e-3) / 1e12, "TB/s");
    for (const auto& k : kDecodeKernels) {
      if (k.second != cuda::DecodeKernel::kStaged && k.second != cuda::DecodeKernel::kStagedCluster) continue;
      auto launch = [&](int i) {
        cuda::launch_decode_attention_lab(attn_args(p, p.metas[i % copies], 1, 1, 131072, heads, kv_heads, d), ws,
                                          be.num_sms(), be.stream(), {0, 0, k.second});
      };
      const double g_ms = graph_ms_per_launch(be, 20, launch);
      result("decode_kernel_graph", "B1_S4096_grid_for_128k_" + k.first, kv_bytes / (g_ms * 1e-3) / 1e12, "TB/s");
      // Other split counts than production's 8 (16: a split's pages in one fill; fewer: longer splits refill their
      // buffers, and the merge reads fewer partials).
      for (int64_t splits : {4, 12, 16}) {
        auto lab = [&](int i) {
          cuda::launch_decode_attention_lab(attn_args(p, p.metas[i % copies], 1, 1, ctx, heads, kv_heads, d), ws,
                                            be.num_sms(), be.stream(), {splits, 0, k.second});
        };
        const double s_ms = graph_ms_per_launch(be, 20, lab);
        result("decode_kernel_graph", "B1_S4096_splits" + std::to_string(splits) + "_" + k.first,
               kv_bytes / (s_ms * 1e-3) / 1e12, "TB/s");
      }
    }
  }
  // head_dim 256 (16 query / 8 kv heads): the split-KV decode kernel (production) against the prefill kernel that
  // served these decode steps before it took head_dim 256.
  for (int64_t b : {1, 64}) {
    const int64_t h256 = 16, kv256 = 8, d256 = 256, ctx = 4096;
    const size_t kv_bytes = static_cast<size_t>(b * ctx * kv256 * d256 * 2 * 2);
    const int copies = static_cast<int>(std::max<size_t>(1, kL2Rotate / kv_bytes + 1));
    AttnProblem p = make_attn(be, b, 1, ctx, h256, kv256, d256, copies);
    const double ms = time_ms(be, [&](int i) { be.attention(p.qkv, p.cache, p.metas[i % copies], p.out); }, 50);
    const double prefill_ms = time_ms(be, [&](int i) {
      cuda::launch_prefill_attention(attn_args(p, p.metas[i % copies], b, 1, ctx, h256, kv256, d256), be.stream());
    }, 50);
    const std::string shape = "B" + std::to_string(b) + "_S4096_h16kv8d256";
    result("decode_attn", shape, kv_bytes / (ms * 1e-3) / 1e12, "TB/s");
    result("decode_lab", shape + "_prefill_kernel", kv_bytes / (prefill_ms * 1e-3) / 1e12, "TB/s");
  }
  // Other GQA groups and head_dim 64 at batch 64 (Qwen3-0.6B: 16 / 8 heads; Qwen2-0.5B: 14 / 2 at d 64), each
  // kernel at the production split count of a 4k graph.
  struct Gqa {
    int64_t heads, kv_heads, d;
  };
  for (const Gqa& gq : {Gqa{16, 8, 128}, Gqa{14, 2, 64}}) {
    for (int64_t ctx : {192, 4096}) {
      const int64_t b = 64;
      const size_t kv_bytes = static_cast<size_t>(b * ctx * gq.kv_heads * gq.d * 2 * 2);
      const int copies = static_cast<int>(std::max<size_t>(1, kL2Rotate / kv_bytes + 1));
      AttnProblem p = make_attn(be, b, 1, ctx, gq.heads, gq.kv_heads, gq.d, copies);
      DeviceBuffer partials(&be, size_t(1) << 26), counters(&be, size_t(1) << 20);
      be.fill_zero(counters.data(), size_t(1) << 20);
      const int64_t rows = (int64_t(1) << 26) / 4 / (gq.d + 1);
      cuda::DecodeWorkspace ws{static_cast<float*>(partials.data()),
                               static_cast<float*>(partials.data()) + rows * gq.d, static_cast<int*>(counters.data()),
                               rows * gq.d / 128};
      for (const auto& k : kDecodeKernels) {
        const double ms = time_ms(be, [&](int i) {
          cuda::launch_decode_attention_lab(
              attn_args(p, p.metas[i % copies], b, 1, 4096, gq.heads, gq.kv_heads, gq.d), ws, be.num_sms(),
              be.stream(), {0, 0, k.second});
        }, 50);
        result("decode_kernel",
               "B64_S" + std::to_string(ctx) + "_h" + std::to_string(gq.heads) + "kv" + std::to_string(gq.kv_heads) +
                   "d" + std::to_string(gq.d) + "_" + k.first,
               kv_bytes / (ms * 1e-3) / 1e12, "TB/s");
      }
    }
  }
}

// RIDGELINE_BENCH_PREFILL_EXTRA: more causal shapes for the production rows, "BxS" items separated by commas (at most
// 8, B in [1, 64], S in [1, 32768], B × S at most 65,536 tokens), for choices by length (kernel_config.h,
// kPrefillSm90DiagHalfMaxKeyTiles) whose limit lies between the four fixed shapes. A malformed list stops the bench
// with a message naming the item.
std::vector<std::pair<int64_t, int64_t>> prefill_extra_shapes() {
  std::vector<std::pair<int64_t, int64_t>> shapes;
  const char* env = std::getenv("RIDGELINE_BENCH_PREFILL_EXTRA");
  if (env == nullptr || *env == '\0') return shapes;
  const std::string list = env;
  size_t start = 0;
  while (start <= list.size()) {
    const size_t end = std::min(list.find(',', start), list.size());
    const std::string item = list.substr(start, end - start);
    long long b = 0, s = 0;
    int used = 0;
    const bool ok = std::sscanf(item.c_str(), "%lldx%lld%n", &b, &s, &used) == 2 &&
                    used == static_cast<int>(item.size()) && b >= 1 && b <= 64 && s >= 1 && s <= 32768 &&
                    b * s <= 65536 && shapes.size() < 8;
    if (!ok) {
      std::fprintf(stderr,
                   "RIDGELINE_BENCH_PREFILL_EXTRA: bad item \"%s\" (want BxS, B in [1, 64], S in [1, 32768], "
                   "B x S <= 65536, at most 8 items)\n",
                   item.c_str());
      std::exit(2);
    }
    shapes.emplace_back(b, s);
    start = end + 1;
  }
  return shapes;
}

// RIDGELINE_BENCH_PREFILL_QSCALE: the production rows' queries drawn from [-x, x) instead of [-1, 1) (x in (0, 64]),
// their rows named with a "_qX" suffix. With K in [-1, 1) a row's scores spread about 0.5 (log2 units) at x = 1, so
// the Hopper kernel's exponentials first almost never leave their fast path and its lazy rescale almost never moves a
// row's max; the dummy-weight model's layers spread them about 2.4 (kernel_config.h, kPrefillSm90LazyRescale). A bad
// value stops the bench.
float prefill_q_scale() {
  const char* env = std::getenv("RIDGELINE_BENCH_PREFILL_QSCALE");
  if (env == nullptr || *env == '\0') return 1.0f;
  char* end = nullptr;
  const float x = std::strtof(env, &end);
  if (end == env || *end != '\0' || !(x > 0.0f && x <= 64.0f)) {
    std::fprintf(stderr, "RIDGELINE_BENCH_PREFILL_QSCALE: bad value \"%s\" (want a number in (0, 64])\n", env);
    std::exit(2);
  }
  return x;
}

// production_only (group prefill_production, or prefill_production_bsN for a KV block size of N): the production rows
// of the four causal shapes (and RIDGELINE_BENCH_PREFILL_EXTRA's) and nothing else, for calls that alternate them with
// the torch peers (scripts/device/prefill_vs_cudnn.sh).
void bench_prefill(CudaBackend& be, bool production_only, int64_t block_size = 16) {
  const int64_t heads = 32, kv_heads = 8, d = 128;
  // A mixed step as the offline run has them: 256 decode rows at 1,536 keys first, then 8 prefill chunks of 1,024
  // new tokens. All rows through the prefill kernel (production) against the decode rows through the decode kernel
  // (CudaBackend::set_split_mixed, lab), and the decode rows alone (the decode kernel's share).
  if (!production_only) {
    std::vector<SeqShape> seqs(256, SeqShape{1, 1536});
    for (int i = 0; i < 8; ++i) seqs.push_back(SeqShape{1024, 1024});
    AttnProblem p = make_attn_seqs(be, seqs, heads, kv_heads, d, 1);
    p.metas[0].num_leading_decodes = 256;
    const bool split_default = be.split_mixed();
    for (bool split : {false, true}) {
      be.set_split_mixed(split);
      const double ms = time_ms(be, [&](int) { be.attention(p.qkv, p.cache, p.metas[0], p.out); }, 10);
      result("mixed_attn", std::string("256x1536_decode_8x1024_prefill") + (split ? "_split" : ""), ms * 1e3, "us");
    }
    be.set_split_mixed(split_default);
    AttnProblem dp = make_attn(be, 256, 1, 1536, heads, kv_heads, d, 1);
    const double ms = time_ms(be, [&](int) { be.attention(dp.qkv, dp.cache, dp.metas[0], dp.out); }, 10);
    result("mixed_attn", "256x1536_decode_alone", ms * 1e3, "us");
    // The same mixed step over an FP8 cache (production split: the fp8 decode kernel, then the FA2 prefill kernel
    // converting as it loads).
    AttnProblem fp = make_attn_seqs(be, seqs, heads, kv_heads, d, 1, 16, DType::kFP8E4M3);
    fp.metas[0].num_leading_decodes = 256;
    const double fms = time_ms(be, [&](int) { be.attention(fp.qkv, fp.cache, fp.metas[0], fp.out); }, 10);
    result("mixed_attn", "256x1536_decode_8x1024_prefill_fp8", fms * 1e3, "us");
  }
  // The production rows' launches (default 10; RIDGELINE_BENCH_PREFILL_REPS) and, beside each median, the fastest and
  // the slowest launch (prefill_attn_fastest / _slowest): whether a row's spread is within a process or between them.
  const char* reps_env = std::getenv("RIDGELINE_BENCH_PREFILL_REPS");
  const int reps = reps_env != nullptr ? std::max(1, std::atoi(reps_env)) : 10;
  const auto spread = [](const std::string& name, double flops, const std::vector<float>& t) {
    result("prefill_attn_fastest", name, flops / (t.front() * 1e-3) / 1e12, "TFLOP/s");
    result("prefill_attn_slowest", name, flops / (t.back() * 1e-3) / 1e12, "TFLOP/s");
  };
  // One production row: b causal sequences of s tokens, `launches` timed launches (the median, and the spread); in
  // production_only runs also the output's hash. Returns the problem for the lab rows that follow.
  const float q_scale = prefill_q_scale();
  const auto production_row = [&](int64_t b, int64_t s, int launches) {
    AttnProblem p = make_attn(be, b, s, s, heads, kv_heads, d, 1, block_size);
    if (q_scale != 1.0f) be.fill_uniform(p.qkv, 7, -q_scale, q_scale);  // make_attn's seed, scaled
    std::vector<float> times;
    const double ms = time_ms(be, [&](int) { be.attention(p.qkv, p.cache, p.metas[0], p.out); }, launches, &times);
    const double flops = 4.0 * b * s * s * heads * d / 2;
    std::string name = std::to_string(b) + "x" + std::to_string(s) + "_h32kv8d128_causal";
    if (q_scale != 1.0f) {
      char suffix[32];
      std::snprintf(suffix, sizeof(suffix), "_q%g", q_scale);
      name += suffix;
    }
    result("prefill_attn", name, flops / (ms * 1e-3) / 1e12, "TFLOP/s");
    spread(name, flops, times);
    if (production_only) print_output_hash(be, name, p.out);
    return p;
  };
  for (const auto& shape : std::vector<std::pair<int64_t, int64_t>>{{4, 4096}, {16, 1024}, {1, 16384}}) {
    const int64_t b = shape.first, s = shape.second;
    AttnProblem p = production_row(b, s, reps);
    if (production_only) continue;
    const double flops = 4.0 * b * s * s * heads * d / 2;
    // Over an FP8 cache: the FA2 kernel converting K / V as it loads (the Hopper kernel reads bf16 only), next to the
    // FA2 kernel over bf16 (the prefill_lab _bn64 row below).
    {
      AttnProblem fp = make_attn(be, b, s, s, heads, kv_heads, d, 1, 16, DType::kFP8E4M3);
      const double fms = time_ms(be, [&](int) { be.attention(fp.qkv, fp.cache, fp.metas[0], fp.out); }, 10);
      result("prefill_attn_fp8", std::to_string(b) + "x" + std::to_string(s) + "_h32kv8d128_causal",
             flops / (fms * 1e-3) / 1e12, "TFLOP/s");
    }
    // Production at KV block sizes 64 and 128: a K or V tile of 128 keys takes 16 TMA boxes of 2 KB at block size
    // 16, 4 at 64, 2 at 128. Where the time of the loads goes (the ablation without K/V loads below): box count
    // and issue, or bytes from L2.
    for (int64_t bs : {64, 128}) {
      AttnProblem pb = make_attn(be, b, s, s, heads, kv_heads, d, 1, bs);
      const double bms = time_ms(be, [&](int) { be.attention(pb.qkv, pb.cache, pb.metas[0], pb.out); }, 10);
      result("prefill_lab", std::to_string(b) + "x" + std::to_string(s) + "_bs" + std::to_string(bs),
             flops / (bms * 1e-3) / 1e12, "TFLOP/s");
    }
    // Kernel lab: the Hopper kernel with one block per query head and GQA-packed, then the FA2 kernel's key tiles.
    const cuda::AttentionArgs a90 = attn_args(p, p.metas[0], b, s, s, heads, kv_heads, d);
    if (cuda::prefill_attention_sm90_supported(a90)) {
      for (int v = 0; v < 16; ++v) {
        cuda::PrefillSm90Options o;
        o.pack = v & 1;
        o.intra_overlap = v & 2;
        o.persistent = v & 4;
        o.k_stages = v & 8 ? 3 : 2;
        const double lab_ms =
            time_ms(be, [&](int) { cuda::launch_prefill_attention_sm90(a90, o, be.num_sms(), be.stream()); }, 10);
        result("prefill_lab",
               std::to_string(b) + "x" + std::to_string(s) + "_sm90" + (o.pack ? "_packed" : "") +
                   (o.intra_overlap ? "_intra" : "") + (o.persistent ? "_persistent" : "") + "_k" +
                   std::to_string(o.k_stages),
               flops / (lab_ms * 1e-3) / 1e12, "TFLOP/s");
      }
      // The production variant with the consumers' turns running on across items (also packed) and with 3 V stages.
      // v = 4: continuous, 3 V stages and the lazy rescale; v = 5: that with snake-ordered rounds of items; v = 6:
      // that with the diagonal's half tiles (production up to kPrefillSm90DiagHalfMaxKeyTiles key tiles; v = 4 is the
      // form without them).
      for (int v = 0; v < 7; ++v) {
        cuda::PrefillSm90Options o;
        o.pack = v == 3;
        o.intra_overlap = true;
        o.persistent = true;
        o.k_stages = 3;
        o.continuous_turns = v != 1;
        o.v_stages = v == 1 || v == 2 || v >= 4 ? 3 : 2;
        o.lazy_rescale = v >= 4;
        o.snake = v == 5;
        o.diag_half = v == 6;
        const double lab_ms =
            time_ms(be, [&](int) { cuda::launch_prefill_attention_sm90(a90, o, be.num_sms(), be.stream()); }, 10);
        result("prefill_lab",
               std::to_string(b) + "x" + std::to_string(s) + "_sm90" + (o.pack ? "_packed" : "") +
                   "_intra_persistent_k3" + (o.v_stages == 3 ? "_v3" : "") + (o.continuous_turns ? "_cont" : "") +
                   (o.lazy_rescale ? "_lazy" : "") + (o.snake ? "_snake" : "") + (o.diag_half ? "_diaghalf" : ""),
               flops / (lab_ms * 1e-3) / 1e12, "TFLOP/s");
      }
      for (int ablate = 1; ablate <= 3; ++ablate) {  // where the time goes: one part left out
        const double lab_ms = time_ms(
            be, [&](int) { cuda::launch_prefill_attention_sm90_ablation(a90, ablate, be.num_sms(), be.stream()); }, 10);
        static const char* const kPart[] = {"", "_no_kv_loads", "_no_softmax", "_no_pv_gemm"};
        result("prefill_lab", std::to_string(b) + "x" + std::to_string(s) + "_sm90_ablate" + kPart[ablate],
               flops / (lab_ms * 1e-3) / 1e12, "TFLOP/s");
      }
    }
    for (int bn : {32, 64}) {
      const cuda::AttentionArgs a = attn_args(p, p.metas[0], b, s, s, heads, kv_heads, d);
      const double lab_ms = time_ms(be, [&](int) { cuda::launch_prefill_attention_tile_lab(a, be.stream(), bn); }, 10);
      result("prefill_lab", std::to_string(b) + "x" + std::to_string(s) + "_bn" + std::to_string(bn),
             flops / (lab_ms * 1e-3) / 1e12, "TFLOP/s");
      if (bn == 64) {  // the GQA-packed instance (K/V tiles loaded once per group)
        const double pack_ms = time_ms(be, [&](int) { cuda::launch_prefill_attention_lab(a, 1, be.stream()); }, 10);
        result("prefill_lab", std::to_string(b) + "x" + std::to_string(s) + "_gqa_packed",
               flops / (pack_ms * 1e-3) / 1e12, "TFLOP/s");
      }
    }
  }
  // The 32k-token prompt's attention (issue 21.4's TTFT) alone, production: the end-to-end trace gives its share of
  // the step, this row its rate away from the GEMMs around it.
  {
    const int64_t s = 32768;
    AttnProblem p = production_row(1, s, std::max(5, reps / 2));
    if (production_only) {
      for (const auto& [eb, es] : prefill_extra_shapes()) production_row(eb, es, reps);
      return;
    }
    const double flops = 4.0 * s * s * heads * d / 2;
    const int snake_mode = be.prefill_snake_mode();
    const bool snake_on = snake_mode < 0 ? cuda::prefill_sm90_snake(s) : snake_mode == 1;
    be.set_prefill_snake_mode(snake_on ? 0 : 1);
    const double sms = time_ms(be, [&](int) { be.attention(p.qkv, p.cache, p.metas[0], p.out); }, 5);
    be.set_prefill_snake_mode(snake_mode);
    result("prefill_lab", std::string("1x32768_sm90") + (snake_on ? "_no_snake" : "_snake"),
           flops / (sms * 1e-3) / 1e12, "TFLOP/s");
    // GQA-packed (one block per KV head: each K/V tile crosses from L2 once per group, not once per query head), with
    // continuous turns and 2 V stages (the packed lab form of the rows above): at 32k the items in flight spread over
    // more key positions, so less of the K/V they read is shared in L2.
    const cuda::AttentionArgs a90 = attn_args(p, p.metas[0], 1, s, s, heads, kv_heads, d);
    if (cuda::prefill_attention_sm90_supported(a90)) {
      cuda::PrefillSm90Options o;
      o.pack = true;
      o.intra_overlap = true;
      o.persistent = true;
      o.k_stages = 3;
      o.continuous_turns = true;
      o.v_stages = 2;
      const double pms =
          time_ms(be, [&](int) { cuda::launch_prefill_attention_sm90(a90, o, be.num_sms(), be.stream()); }, 5);
      result("prefill_lab", "1x32768_sm90_packed_intra_persistent_k3_cont", flops / (pms * 1e-3) / 1e12, "TFLOP/s");
    }
  }
}

// Whether the 1 x 16k row's rate depends on where its buffers land: that row is bimodal from one process to the next
// (about 590 or 630 TFLOP/s on an H100, sessions 31-33) where cuDNN's is not. The same problem is allocated afresh
// eight times, each behind a pad of another size that stays allocated, and timed (median of 20 launches, and the
// fastest); each row names the K, V and qkv addresses.
void bench_prefill_placement(CudaBackend& be) {
  const int64_t s = 16384, heads = 32, kv_heads = 8, d = 128;
  const double flops = 4.0 * s * s * heads * d / 2;
  std::vector<DeviceBuffer> pads;
  for (int i = 0; i < 8; ++i) {
    pads.emplace_back(&be, (static_cast<size_t>(i) * 5 + 1) << 20);
    AttnProblem p = make_attn(be, 1, s, s, heads, kv_heads, d, 1);
    std::vector<float> times;
    const double ms = time_ms(be, [&](int) { be.attention(p.qkv, p.cache, p.metas[0], p.out); }, 20, &times);
    char name[160];
    std::snprintf(name, sizeof(name), "1x16384_alloc%d_k%llx_v%llx_qkv%llx", i,
                  static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(p.cache.k.data)),
                  static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(p.cache.v.data)),
                  static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(p.qkv.data)));
    result("prefill_placement", name, flops / (ms * 1e-3) / 1e12, "TFLOP/s");
    result("prefill_placement_fastest", name, flops / (times.front() * 1e-3) / 1e12, "TFLOP/s");
  }
}

// Where a Hopper prefill launch's time goes, item by item (launch_prefill_attention_sm90_trace's stamps): per block,
// the share of its span each consumer spends in its tiles, storing its rows and waiting for the next item's Q; the
// producer's wait for the Q buffer and the cycles from Q's copies to consumer 0 having Q (medians over blocks).
// The traced launch's output is checked bit for bit against the backend's launch of the same form.
void bench_prefill_trace(CudaBackend& be) {
  const int64_t heads = 32, kv_heads = 8, d = 128;
  constexpr int kMaxItems = 256, kS = cuda::kPrefillSm90TraceStamps;
  for (const auto& shape : std::vector<std::pair<int64_t, int64_t>>{{16, 1024}, {4, 4096}, {1, 16384}}) {
    const int64_t b = shape.first, s = shape.second;
    const std::string name = std::to_string(b) + "x" + std::to_string(s);
    AttnProblem p = make_attn(be, b, s, s, heads, kv_heads, d, 1, 16);
    const cuda::AttentionArgs a = attn_args(p, p.metas[0], b, s, s, heads, kv_heads, d);
    if (!cuda::prefill_attention_sm90_supported(a)) return;
    const size_t out_bytes = p.out.nbytes();
    const int diag_mode = be.prefill_diag_half_mode();
    be.set_prefill_diag_half_mode(0);  // the traced form
    be.attention(p.qkv, p.cache, p.metas[0], p.out);
    be.set_prefill_diag_half_mode(diag_mode);
    std::vector<uint16_t> want(out_bytes / 2), got(out_bytes / 2);
    be.synchronize();
    be.download(want.data(), p.out.data, out_bytes);
    const size_t trace_bytes = static_cast<size_t>(be.num_sms()) * kMaxItems * kS * sizeof(long long);
    DeviceBuffer trace(&be, trace_bytes);
    long long* tr = static_cast<long long*>(trace.data());
    int blocks = 0;
    for (int rep = 0; rep < 3; ++rep) {  // warm-ups, then the recorded launch
      RL_CUDA_CHECK(cudaMemsetAsync(tr, 0, trace_bytes, be.stream()));
      blocks = cuda::launch_prefill_attention_sm90_trace(a, be.num_sms(), be.stream(), tr, kMaxItems,
                                                         be.prefill_q_ring(a.max_seqlen_k));
    }
    std::vector<long long> t(trace_bytes / sizeof(long long));
    be.synchronize();
    be.download(t.data(), tr, trace_bytes);
    be.download(got.data(), p.out.data, out_bytes);
    result("prefill_trace", name + "_same_bits_as_production", want == got ? 1 : 0, "bool");
    // Per block: shares of its span (first item taken to last rows stored).
    std::vector<double> tiles[2], store[2], wait_q[2], q_latency, producer_wait, items;
    for (int blk = 0; blk < blocks; ++blk) {
      const long long* bt = t.data() + static_cast<size_t>(blk) * kMaxItems * kS;
      int n = 0;
      while (n < kMaxItems && bt[n * kS] != 0) ++n;
      if (n == 0) continue;
      const long long t0 = bt[0];
      long long t1 = 0;
      for (int c = 0; c < 2; ++c) t1 = std::max(t1, bt[(n - 1) * kS + 4 + 3 * c]);
      const double span = static_cast<double>(t1 - t0);
      if (span <= 0) continue;
      items.push_back(n);
      double pw = 0, ql = 0;
      for (int k = 0; k < n; ++k) {
        pw += static_cast<double>(bt[k * kS + 1] - bt[k * kS]);
        ql += static_cast<double>(bt[k * kS + 2] - bt[k * kS + 1]);
      }
      producer_wait.push_back(pw / span);
      q_latency.push_back(ql / n);
      for (int c = 0; c < 2; ++c) {
        double ti = 0, st = 0, wq = 0;
        for (int k = 0; k < n; ++k) {
          const long long* e = bt + k * kS + 2 + 3 * c;  // has Q, last tile done, rows stored
          ti += static_cast<double>(e[1] - e[0]);
          st += static_cast<double>(e[2] - e[1]);
          wq += static_cast<double>(e[0] - (k == 0 ? t0 : bt[(k - 1) * kS + 4 + 3 * c]));
        }
        tiles[c].push_back(ti / span);
        store[c].push_back(st / span);
        wait_q[c].push_back(wq / span);
      }
    }
    const auto median = [](std::vector<double> v) {
      if (v.empty()) return 0.0;
      std::sort(v.begin(), v.end());
      return v[v.size() / 2];
    };
    result("prefill_trace", name + "_items_a_block", median(items), "items");
    for (int c = 0; c < 2; ++c) {
      const std::string cn = name + "_consumer" + std::to_string(c);
      result("prefill_trace", cn + "_tiles", 100 * median(tiles[c]), "%");
      result("prefill_trace", cn + "_store", 100 * median(store[c]), "%");
      result("prefill_trace", cn + "_wait_for_q", 100 * median(wait_q[c]), "%");
    }
    result("prefill_trace", name + "_producer_wait_for_q_buffer", 100 * median(producer_wait), "%");
    result("prefill_trace", name + "_q_copies_to_consumer0", median(q_latency), "cycles");
  }
}

// MLA decode attention (absorbed queries over the paged latent cache, kv_lora_rank 512 + rope 64) at the
// DeepSeek-V2-Lite (16 heads) and DeepSeek-V3 (128 heads) widths, batch 1 and 64, context 4096: latent bytes / time
// (TB/s) and FLOPs / time (2 · B · heads · S · (576 + 512)); default and deterministic mode, and a split-count lab.
void bench_mla(CudaBackend& be) {
  constexpr int64_t kLat = 576, kRank = 512, kBs = 16;
  for (int64_t heads : {16, 128}) {
    for (int64_t b : {1, 64}) {
      const int64_t ctx = 4096, pages = ctx / kBs;
      const size_t kv_bytes = static_cast<size_t>(b * ctx * kLat * 2);
      const int copies = static_cast<int>(std::max<size_t>(1, kL2Rotate / kv_bytes + 1));
      const int64_t num_blocks = 1 + copies * b * pages;
      DeviceBuffer cache_buf(&be, static_cast<size_t>(num_blocks * kBs * kLat * 2));
      DeviceBuffer q_buf(&be, static_cast<size_t>(b * heads * kLat * 2));
      DeviceBuffer out_buf(&be, static_cast<size_t>(b * heads * kRank * 2));
      KvLayer cache;
      cache.k = Tensor(cache_buf.data(), DType::kBF16, {num_blocks, kBs, 1, kLat});
      const Tensor q(q_buf.data(), DType::kBF16, {b, heads * kLat});
      const Tensor out(out_buf.data(), DType::kBF16, {b, heads * kRank});
      be.fill_uniform(cache.k, 8, -1, 1);
      be.fill_uniform(q, 9, -1, 1);
      std::vector<DeviceBuffer> keep;
      std::vector<AttentionMetadata> metas;
      std::vector<int32_t> cu(b + 1), lens(b, static_cast<int32_t>(ctx));
      for (int64_t s = 0; s <= b; ++s) cu[s] = static_cast<int32_t>(s);
      auto upload_i32 = [&](const std::vector<int32_t>& v, std::initializer_list<int64_t> dims) {
        keep.emplace_back(&be, v.size() * 4);
        be.upload(keep.back().data(), v.data(), v.size() * 4);
        return Tensor(keep.back().data(), DType::kI32, dims);
      };
      for (int c = 0; c < copies; ++c) {
        std::vector<int32_t> table(b * pages);
        for (int64_t s = 0; s < b; ++s)
          for (int64_t j = 0; j < pages; ++j) table[s * pages + j] = static_cast<int32_t>(1 + (c * b + s) * pages + j);
        AttentionMetadata m;
        m.cu_seqlens_q = upload_i32(cu, {b + 1});
        m.seq_lens_k = upload_i32(lens, {b});
        m.block_tables = upload_i32(table, {b, pages});
        m.num_seqs = b;
        m.max_seqlen_q = 1;
        m.max_seqlen_k = ctx;
        m.all_decode = true;
        m.scale = 0.1f;
        metas.push_back(m);
      }
      const MlaLayout l{heads, 128, 64, kRank};
      const std::string shape = "B" + std::to_string(b) + "_S" + std::to_string(ctx) + "_h" + std::to_string(heads);
      const double flops = 2.0 * b * heads * ctx * (kLat + kRank);
      for (bool det : {false, true}) {
        be.set_deterministic(det);
        const double ms = time_ms(be, [&](int i) { be.mla_attention(q, cache, metas[i % copies], l, out); }, 50);
        result(det ? "mla_decode_det" : "mla_decode", shape, kv_bytes / (ms * 1e-3) / 1e12, "TB/s");
        result(det ? "mla_decode_tf_det" : "mla_decode_tf", shape, flops / (ms * 1e-3) / 1e12, "TFLOP/s");
      }
      be.set_deterministic(false);
      // Kernel lab: forced split counts (own workspace), and the naive kernel at batch 1.
      DeviceBuffer partials(&be, size_t(1) << 28);
      const cuda::MlaWorkspace ws{static_cast<float*>(partials.data()), int64_t(1) << 26};
      auto args = [&](const AttentionMetadata& m) {
        cuda::MlaAttentionArgs a;
        a.q_lat = static_cast<const uint16_t*>(q.data);
        a.cache = static_cast<const uint16_t*>(cache.k.data);
        a.cu_seqlens_q = m.cu_seqlens_q.as<int32_t>();
        a.seq_lens_k = m.seq_lens_k.as<int32_t>();
        a.block_tables = m.block_tables.as<int32_t>();
        a.out = static_cast<uint16_t*>(out.data);
        a.num_tokens = a.num_seqs = b;
        a.max_seqlen_q = 1;
        a.max_seqlen_k = ctx;
        a.max_blocks = pages;
        a.num_heads = heads;
        a.kv_lora_rank = kRank;
        a.rope_dim = kLat - kRank;
        a.block_size = kBs;
        a.scale = m.scale;
        return a;
      };
      const std::vector<int64_t> split_list = b == 1 ? std::vector<int64_t>{8, 16, 32, 64, 128}
                                                     : std::vector<int64_t>{1, 2, 3, 4};
      for (int64_t splits : split_list) {
        const double ms = time_ms(be, [&](int i) {
          cuda::launch_mla_attention(args(metas[i % copies]), ws, false, be.num_sms(), be.stream(), splits);
        }, 50);
        result("mla_lab", shape + "_splits" + std::to_string(splits), kv_bytes / (ms * 1e-3) / 1e12, "TB/s");
      }
      if (b == 1) {
        const double ms = time_ms(be, [&](int i) {
          cuda::launch_mla_attention(args(metas[i % copies]), ws, false, be.num_sms(), be.stream(), 0, true);
        }, 10);
        result("mla_lab", shape + "_naive", kv_bytes / (ms * 1e-3) / 1e12, "TB/s");
      }
    }
  }
}


// The sampler (a cluster of blocks per row over the vocabulary, and one block for comparison; every parameter of
// ops.h) at batch 1 with the vocabularies
// of Llama 3.1 (128,256) and Qwen3 (151,936): greedy and top-k/top-p sampling, each without and with a
// structured-output mask (SampleRowParams::mask_row; half the tokens allowed, a random pattern), and the per-step
// upload of one mask row from pinned memory, which is what structured outputs add to a decode step on the device.
void bench_sample(CudaBackend& be) {
  for (int64_t vocab : {int64_t{128256}, int64_t{151936}}) {
    const int64_t words = (vocab + 31) / 32;
    constexpr int kCopies = 8;  // logits rows rotated so that no repetition reads a row the previous one wrote
    DeviceBuffer logits(&be, static_cast<size_t>(kCopies * vocab * 4)), mask(&be, static_cast<size_t>(words * 4));
    DeviceBuffer params(&be, sizeof(SampleRowParams)), out_tokens(&be, 64), out_logprobs(&be, 64);
    be.fill_uniform(Tensor(logits.data(), DType::kF32, {kCopies, vocab}), 7, -8.0f, 8.0f);
    uint32_t* host_mask = nullptr;
    RL_CUDA_CHECK(cudaMallocHost(&host_mask, static_cast<size_t>(words * 4)));
    uint64_t state = 0x9e3779b97f4a7c15ull;
    for (int64_t w = 0; w < words; ++w) {
      state ^= state << 13, state ^= state >> 7, state ^= state << 17;
      host_mask[w] = static_cast<uint32_t>(state);
    }
    RL_CUDA_CHECK(cudaMemcpy(mask.data(), host_mask, static_cast<size_t>(words * 4), cudaMemcpyHostToDevice));
    const std::string v = "v" + std::to_string(vocab);
    // Kinds: 0 greedy, 1 top-k 50 + top-p 0.95, 2 temperature only, 3 top-k 50 only, 4 top-p 0.95 only.
    for (int kind : {0, 1, 2, 3, 4}) {
      for (bool masked : {false, true}) {
        if (kind >= 2 && masked) continue;
        const bool sampled = kind > 0;
        SampleRowParams p;
        p.temperature = sampled ? 0.8f : 0.0f;
        p.seed = 1;
        if (kind == 1 || kind == 3) p.top_k = 50;
        if (kind == 1 || kind == 4) p.top_p = 0.95f;
        p.mask_row = masked ? 0 : -1;
        RL_CUDA_CHECK(cudaMemcpy(params.data(), &p, sizeof(p), cudaMemcpyHostToDevice));
        SampleBatch b;
        b.num_rows = 1;
        b.params = static_cast<const SampleRowParams*>(params.data());
        b.allowed_mask = static_cast<const uint32_t*>(mask.data());
        b.out_tokens = static_cast<int32_t*>(out_tokens.data());
        b.out_logprobs = static_cast<float*>(out_logprobs.data());
        static const char* const kKind[] = {"_greedy", "_topk50_topp0.95", "_temp0.8", "_topk50", "_topp0.95"};
        // The production cluster of blocks per row, then one block per row (the kernel before clusters), and
        // clusters of 4 and 16 blocks.
        for (int cluster : {0, 1, 4, 16}) {
          const double ms = time_ms(be, [&](int i) {
            cuda::launch_sample_lab(static_cast<float*>(logits.data()) + (i % kCopies) * vocab, vocab, b,
                                    be.num_sms(), be.stream(), cluster);
          }, 100);
          result("sample", v + kKind[kind] + (masked ? "_mask" : "_nomask") +
                               (cluster == 0 ? "" : "_" + std::to_string(cluster) + "block"),
                 ms * 1e3, "us");
        }
      }
    }
    const double up = time_ms(be, [&](int) {
      RL_CUDA_CHECK(cudaMemcpyAsync(mask.data(), host_mask, static_cast<size_t>(words * 4), cudaMemcpyHostToDevice,
                                    be.stream()));
    }, 100);
    result("sample", v + "_mask_upload_" + std::to_string(words * 4) + "B", up * 1e3, "us");
    RL_CUDA_CHECK(cudaFreeHost(host_mask));
  }
  // A batch of 64 rows (a batch-64 decode step), greedy and top-k 50 + top-p 0.95, by blocks per row (0: the
  // production choice for 64 rows).
  {
    constexpr int64_t kRows = 64, vocab = 128256;
    constexpr int kCopies = 4;
    DeviceBuffer logits(&be, static_cast<size_t>(kCopies * kRows * vocab * 4));
    DeviceBuffer params(&be, kRows * sizeof(SampleRowParams)), out_tokens(&be, kRows * 4), out_logprobs(&be, kRows * 4);
    be.fill_uniform(Tensor(logits.data(), DType::kF32, {kCopies * kRows, vocab}), 7, -8.0f, 8.0f);
    for (int kind : {0, 1}) {
      std::vector<SampleRowParams> rows(kRows);
      for (int64_t r = 0; r < kRows; ++r) {
        rows[r].temperature = kind ? 0.8f : 0.0f;
        rows[r].seed = static_cast<uint64_t>(r + 1);
        if (kind) {
          rows[r].top_k = 50;
          rows[r].top_p = 0.95f;
        }
      }
      RL_CUDA_CHECK(cudaMemcpy(params.data(), rows.data(), kRows * sizeof(SampleRowParams), cudaMemcpyHostToDevice));
      SampleBatch b;
      b.num_rows = kRows;
      b.params = static_cast<const SampleRowParams*>(params.data());
      b.out_tokens = static_cast<int32_t*>(out_tokens.data());
      b.out_logprobs = static_cast<float*>(out_logprobs.data());
      for (int cluster : {0, 1, 2, 4, 8}) {
        const double ms = time_ms(be, [&](int i) {
          cuda::launch_sample_lab(static_cast<float*>(logits.data()) + (i % kCopies) * kRows * vocab, vocab, b,
                                  be.num_sms(), be.stream(), cluster);
        }, 50);
        result("sample", std::string("B64_v128256") + (kind ? "_topk50_topp0.95" : "_greedy") +
                             (cluster == 0 ? "" : "_" + std::to_string(cluster) + "block"),
               ms * 1e3, "us");
      }
    }
  }
}

}  // namespace
// The prefill's memory-bound kernels on the Llama-3.1-8B shape (32 / 8 heads of 128, hidden 4096, intermediate
// 14336), bytes moved / time against the copy row: q/k norm + RoPE with the KV write (Qwen3's norms on) in both forms
// at decode to prefill token counts, SiLU·mul and the residual add + RMSNorm at the 32k prompt's 32,000 rows.
void bench_elementwise(CudaBackend& be) {
  const int64_t nh = 32, nkv = 8, d = 128, row = (nh + 2 * nkv) * d, kv_row = nkv * d, max_t = 32000;
  DeviceBuffer qkv(&be, static_cast<size_t>(max_t * row * 2)), kc(&be, static_cast<size_t>(max_t * kv_row * 2)),
      vc(&be, static_cast<size_t>(max_t * kv_row * 2)), pos(&be, static_cast<size_t>(max_t * 4)),
      slots(&be, static_cast<size_t>(max_t * 4)), inv(&be, static_cast<size_t>(d / 2 * 4)),
      qn(&be, static_cast<size_t>(d * 2)), kn(&be, static_cast<size_t>(d * 2));
  be.fill_uniform(Tensor(qkv.data(), DType::kBF16, {max_t, row}), 7, -1, 1);
  be.fill_uniform(Tensor(qn.data(), DType::kBF16, {d}), 8, 0.5f, 1.5f);
  be.fill_uniform(Tensor(kn.data(), DType::kBF16, {d}), 9, 0.5f, 1.5f);
  std::vector<int32_t> p(max_t);
  std::iota(p.begin(), p.end(), 0);
  be.upload(pos.data(), p.data(), p.size() * 4);
  be.upload(slots.data(), p.data(), p.size() * 4);  // slot t for token t
  std::vector<float> f(d / 2);
  for (int64_t i = 0; i < d / 2; ++i) f[i] = std::pow(500000.0f, -2.0f * static_cast<float>(i) / d);
  be.upload(inv.data(), f.data(), f.size() * 4);
  for (int64_t t : {64, 256, 512, 1024, 2048, 4096, 32000}) {
    cuda::QkNormRopeArgs a;
    a.qkv = static_cast<uint16_t*>(qkv.data());
    a.positions = static_cast<const int32_t*>(pos.data());
    a.inv_freq = static_cast<const float*>(inv.data());
    a.q_norm = qn.data();
    a.k_norm = kn.data();
    a.num_tokens = t;
    a.num_heads = nh;
    a.num_kv_heads = nkv;
    a.head_dim = d;
    a.slots = static_cast<const int32_t*>(slots.data());
    a.num_slots = max_t;
    a.k_cache = static_cast<uint16_t*>(kc.data());
    a.v_cache = static_cast<uint16_t*>(vc.data());
    // qkv read, q and k written back, k and v written to the caches.
    const double bytes = static_cast<double>(t) * (row + (nh + nkv) * d + 2 * kv_row) * 2;
    for (const auto& form : {std::make_pair("warp_per_head", cuda::QkNormRopeForm::kWarpPerHead),
                             std::make_pair("block_256", cuda::QkNormRopeForm::kBlock256),
                             std::make_pair("block_128", cuda::QkNormRopeForm::kBlock128),
                             std::make_pair("production", cuda::QkNormRopeForm::kAuto)}) {
      const double ms = time_ms(be, [&](int) { cuda::launch_qk_norm_rope_lab(a, form.second, be.stream()); });
      result("qk_norm_rope_kv", std::to_string(t) + "x32q8kv_d128_" + form.first, bytes / (ms * 1e-3) / 1e12, "TB/s");
      result("qk_norm_rope_kv_us", std::to_string(t) + "x32q8kv_d128_" + form.first, ms * 1e3, "us");
    }
  }
  {
    const int64_t rows = max_t, inter = 14336;
    DeviceBuffer gu(&be, static_cast<size_t>(rows * 2 * inter * 2)), out(&be, static_cast<size_t>(rows * inter * 2));
    be.fill_uniform(Tensor(gu.data(), DType::kBF16, {rows, 2 * inter}), 10, -4, 4);
    const double ms = time_ms(be, [&](int) {
      cuda::launch_silu_mul(static_cast<const uint16_t*>(gu.data()), static_cast<uint16_t*>(out.data()), rows, inter,
                            be.stream());
    }, 10);
    result("silu_mul", "32000x14336", 3.0 * rows * inter * 2 / (ms * 1e-3) / 1e12, "TB/s");
  }
  {
    const int64_t rows = max_t, hidden = 4096;
    DeviceBuffer res(&be, static_cast<size_t>(rows * hidden * 2)), x(&be, static_cast<size_t>(rows * hidden * 2)),
        out(&be, static_cast<size_t>(rows * hidden * 2)), w(&be, static_cast<size_t>(hidden * 2));
    be.fill_uniform(Tensor(res.data(), DType::kBF16, {rows, hidden}), 11, -1, 1);
    be.fill_uniform(Tensor(x.data(), DType::kBF16, {rows, hidden}), 12, -0.01f, 0.01f);
    be.fill_uniform(Tensor(w.data(), DType::kBF16, {hidden}), 13, 0.5f, 1.5f);
    const double ms = time_ms(be, [&](int) {
      cuda::launch_rms_norm(static_cast<uint16_t*>(res.data()), static_cast<const uint16_t*>(x.data()), w.data(),
                            DType::kBF16, static_cast<uint16_t*>(out.data()), rows, hidden, 1e-5f, be.stream());
    }, 10);
    result("add_rms_norm", "32000x4096", 4.0 * rows * hidden * 2 / (ms * 1e-3) / 1e12, "TB/s");
    result("add_rms_norm_ms", "32000x4096", ms, "ms");
    const double plain_ms = time_ms(be, [&](int) {
      cuda::launch_rms_norm(nullptr, static_cast<const uint16_t*>(res.data()), w.data(), DType::kBF16,
                            static_cast<uint16_t*>(out.data()), rows, hidden, 1e-5f, be.stream());
    }, 10);
    result("rms_norm", "32000x4096", 2.0 * rows * hidden * 2 / (plain_ms * 1e-3) / 1e12, "TB/s");
    result("rms_norm_ms", "32000x4096", plain_ms, "ms");
  }
}

}  // namespace rl

namespace rl {

int run_kernel_benchmarks(const std::string& only, int device_index) {
  if (!only.empty() && only != "copy" && only != "linear" && only != "decode" && only != "prefill" &&
      only != "gemv" && only != "skinny" && only != "mla" && only != "sample" && only != "elementwise" &&
      only != "prefill_trace" && only != "prefill_placement" && only.rfind("prefill_production", 0) != 0) {
    std::fprintf(stderr,
                 "ridgeline: error: unknown kernel group \"%s\" (copy, linear, gemv, skinny, decode, prefill, "
                 "prefill_production, prefill_trace, prefill_placement, mla, sample, elementwise)\n",
                 only.c_str());
    return 1;
  }
  auto be = create_cuda_backend(device_index);
  if (!be.is_ok()) {
    std::fprintf(stderr, "ridgeline: error: %s\n", be.message().c_str());
    return 1;
  }
  auto& cuda = static_cast<CudaBackend&>(*be.value());
  std::printf("# %s\n", cuda.name().c_str());
  if (only.empty() || only == "copy") bench_copy(cuda);
  if (only.empty() || only == "linear") bench_linear(cuda);
  if (only.empty() || only == "linear" || only == "gemv") bench_gemv_shapes(cuda);
  if (only.empty() || only == "skinny") bench_skinny(cuda);
  if (only.empty() || only == "decode") bench_decode(cuda);
  if (only.empty() || only == "prefill") bench_prefill(cuda, false);
  if (only.rfind("prefill_production", 0) == 0) {
    const size_t at = only.find("_bs");
    const int64_t bs = at == std::string::npos ? 16 : std::atoll(only.c_str() + at + 3);
    if (bs < 8 || (bs & (bs - 1)) != 0) {
      std::fprintf(stderr, "ridgeline: error: %s: the block size must be a power of two of at least 8\n", only.c_str());
      return 1;
    }
    bench_prefill(cuda, true, bs);
  }
  if (only == "prefill_trace") bench_prefill_trace(cuda);
  if (only == "prefill_placement") bench_prefill_placement(cuda);
  if (only.empty() || only == "mla") bench_mla(cuda);
  if (only.empty() || only == "sample") bench_sample(cuda);
  if (only.empty() || only == "elementwise") bench_elementwise(cuda);
  return 0;
}

}  // namespace rl
