#include "backend/cpu/cpu_backend.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>
#include <numeric>
#include <string>
#include <vector>

#include "core/random.h"

namespace rl {

CpuBackend::CpuBackend(int num_threads, CpuIsa isa) : pool_(num_threads), kern_(&cpu_kernels(isa)) {
  RL_CHECK_MSG(isa <= detect_cpu_isa(), "CPU kernel tier %s is above this CPU's",
               std::string(cpu_isa_name(isa)).c_str());
}

std::string CpuBackend::name() const {
  return "cpu (" + std::to_string(pool_.num_threads()) + " threads, " + std::string(cpu_isa_name(kern_->isa)) +
         " kernels)";
}

// Buffers of 2 MiB and more (weights, the LM head's logits) are 2 MiB-aligned and advised as transparent huge
// pages: decode streams every weight once per token, and with 4 KiB pages the hardware prefetchers stop at each
// page boundary and every 4 KiB costs a TLB walk. RIDGELINE_CPU_HUGEPAGES=0 keeps 4 KiB pages (the A/B switch).
namespace {

constexpr size_t kHuge = size_t{2} << 20;

bool use_huge_pages() {
  static const bool on = [] {
    const char* env = std::getenv("RIDGELINE_CPU_HUGEPAGES");
    return env == nullptr || std::string(env) != "0";
  }();
  return on;
}

}  // namespace

void* CpuBackend::alloc(size_t nbytes) {
  if (use_huge_pages() && nbytes >= kHuge) {
    const size_t rounded = (nbytes + kHuge - 1) / kHuge * kHuge;
    void* p = std::aligned_alloc(kHuge, rounded);
    if (!p) throw std::bad_alloc();
    madvise(p, rounded, MADV_HUGEPAGE);  // advice only: a kernel without THP keeps small pages
    return p;
  }
  size_t rounded = (std::max<size_t>(nbytes, 1) + 63) / 64 * 64;
  void* p = std::aligned_alloc(64, rounded);
  if (!p) throw std::bad_alloc();
  return p;
}
// Large zeroed buffers (the KV pool: 2 GiB by default) come from an anonymous mapping, whose pages the kernel
// supplies as zeros when first touched: zeroing them here would fault in every page at start-up (seconds on a
// small VM) and keep the whole pool resident for nothing. The mapping is advised as huge pages too: decode
// attention reads every layer's K/V blocks once per token, tens of MiB at a few hundred tokens of context, more
// than the TLB covers in 4 KiB pages.
void* CpuBackend::alloc_zeroed(size_t nbytes) {
  constexpr size_t kMapAtLeast = size_t{1} << 20;
  if (nbytes < kMapAtLeast) {
    void* p = alloc(nbytes);
    std::memset(p, 0, nbytes);
    return p;
  }
  void* p = mmap(nullptr, nbytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  if (use_huge_pages() && nbytes >= kHuge) madvise(p, nbytes, MADV_HUGEPAGE);  // advice only, as in alloc
  std::lock_guard<std::mutex> lock(mapped_mu_);
  mapped_.emplace(p, nbytes);
  return p;
}

void CpuBackend::free(void* p) {
  if (p == nullptr) return;
  {
    std::lock_guard<std::mutex> lock(mapped_mu_);
    auto it = mapped_.find(p);
    if (it != mapped_.end()) {
      munmap(p, it->second);
      mapped_.erase(it);
      return;
    }
  }
  std::free(p);
}
void CpuBackend::upload(void* dst, const void* src, size_t n) {
  if (n > 0) std::memcpy(dst, src, n);  // a null src with n == 0 is still undefined for memcpy
}
void CpuBackend::download(void* dst, const void* src, size_t n) {
  if (n > 0) std::memcpy(dst, src, n);
}
void CpuBackend::fill_zero(void* dst, size_t n) { std::memset(dst, 0, n); }

void CpuBackend::memory_info(size_t* free_bytes, size_t* total_bytes) {
  long pages = sysconf(_SC_PHYS_PAGES), avail = sysconf(_SC_AVPHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  *total_bytes = static_cast<size_t>(pages) * static_cast<size_t>(page);
  *free_bytes = static_cast<size_t>(avail) * static_cast<size_t>(page);
}

namespace {

// Reads row `r` of a [rows, cols] f32/bf16/int8 tensor into f32.
inline void load_row(const Tensor& t, int64_t r, float* dst, int64_t cols) {
  if (t.dtype == DType::kI8) {
    I8WeightView v = i8_weight_view(t.data, t.dim(0), cols);
    for (int64_t i = 0; i < cols; ++i) dst[i] = static_cast<float>(v.q[r * cols + i]) * v.scale[r];
  } else if (t.dtype == DType::kF32) {
    std::memcpy(dst, t.as<float>() + r * cols, static_cast<size_t>(cols) * 4);
  } else {
    convert_to_f32(t.as<uint16_t>() + r * cols, t.dtype, dst, static_cast<size_t>(cols));
  }
}

inline void rms_norm_row(const float* x, const Tensor& weight, float* out, int64_t h, float eps) {
  double ss = 0;
  for (int64_t i = 0; i < h; ++i) ss += static_cast<double>(x[i]) * x[i];
  float inv = 1.0f / std::sqrt(static_cast<float>(ss / static_cast<double>(h)) + eps);
  if (weight.dtype == DType::kF32) {
    const float* w = weight.as<float>();
    for (int64_t i = 0; i < h; ++i) out[i] = w[i] * (x[i] * inv);
  } else {
    const uint16_t* w = weight.as<uint16_t>();
    for (int64_t i = 0; i < h; ++i) out[i] = bf16_to_f32(w[i]) * (x[i] * inv);
  }
}

}  // namespace

std::vector<int32_t> cpu_sequence_of_tokens(const AttentionMetadata& meta, int64_t num_tokens) {
  const int32_t* cu = meta.cu_seqlens_q.i32();
  std::vector<int32_t> seq_of(static_cast<size_t>(num_tokens));
  for (int64_t s = 0; s < meta.num_seqs; ++s) {
    for (int32_t i = cu[s]; i < cu[s + 1]; ++i) seq_of[static_cast<size_t>(i)] = static_cast<int32_t>(s);
  }
  return seq_of;
}

void cpu_parallel_tasks(ThreadPool& pool, int64_t n, const std::function<void(int64_t, int)>& fn) {
  if (n <= 0) return;
  if (n == 1 || pool.num_threads() == 1) {
    for (int64_t i = 0; i < n; ++i) fn(i, 0);
    return;
  }
  std::atomic<int64_t> next{0};
  pool.run_on_all([&](int thread) {
    for (int64_t i = next.fetch_add(1, std::memory_order_relaxed); i < n;
         i = next.fetch_add(1, std::memory_order_relaxed)) {
      fn(i, thread);
    }
  });
}

void CpuBackend::embedding(const Tensor& ids, const Tensor& table, const Tensor& out) {
  int64_t n = ids.numel(), h = table.dim(1), vocab = table.dim(0);
  const int32_t* id = ids.i32();
  float* o = out.f32();
  pool_.parallel_for(n, [&](int64_t b, int64_t e, int) {
    for (int64_t i = b; i < e; ++i) {
      RL_CHECK_MSG(id[i] >= 0 && id[i] < vocab, "token id %d outside the vocabulary", id[i]);
      load_row(table, id[i], o + i * h, h);
    }
  });
}

void CpuBackend::embedding_shard(const Tensor& ids, const Tensor& table, int64_t vocab_begin, const Tensor& out) {
  const int64_t n = ids.numel(), h = table.dim(1), rows = table.dim(0);
  const int32_t* id = ids.i32();
  float* o = out.f32();
  pool_.parallel_for(n, [&](int64_t b, int64_t e, int) {
    for (int64_t i = b; i < e; ++i) {
      RL_CHECK_MSG(id[i] >= 0, "token id %d outside the vocabulary", id[i]);
      const int64_t r = id[i] - vocab_begin;
      if (r >= 0 && r < rows) {
        load_row(table, r, o + i * h, h);
      } else {
        std::fill(o + i * h, o + (i + 1) * h, 0.0f);
      }
    }
  });
}

void CpuBackend::copy_columns(const Tensor& src, int64_t src_col, const Tensor& dst, int64_t dst_col, int64_t cols) {
  RL_CHECK(src.ndim == 2 && dst.ndim == 2 && src.dtype == dst.dtype && src.dim(0) == dst.dim(0));
  RL_CHECK(src_col >= 0 && dst_col >= 0 && src_col + cols <= src.dim(1) && dst_col + cols <= dst.dim(1));
  const size_t es = dtype_size(src.dtype);
  const char* s = static_cast<const char*>(src.data);
  char* d = static_cast<char*>(dst.data);
  for (int64_t i = 0; i < src.dim(0); ++i) {
    std::memcpy(d + static_cast<size_t>(i * dst.dim(1) + dst_col) * es,
                s + static_cast<size_t>(i * src.dim(1) + src_col) * es, static_cast<size_t>(cols) * es);
  }
}

void CpuBackend::rms_norm(const Tensor& x, const Tensor& weight, const Tensor& out, const NormParams& p) {
  int64_t h = x.dim(-1);
  const float* xs = x.f32();
  float* o = out.f32();
  pool_.parallel_for(x.rows(), [&](int64_t b, int64_t e, int) {
    for (int64_t r = b; r < e; ++r) rms_norm_row(xs + r * h, weight, o + r * h, h, p.eps);
  });
}

void CpuBackend::add_rms_norm(const Tensor& residual, const Tensor& x, const Tensor& weight, const Tensor& out,
                              const NormParams& p) {
  int64_t h = x.dim(-1);
  float* res = residual.f32();
  const float* xs = x.f32();
  float* o = out.f32();
  pool_.parallel_for(x.rows(), [&](int64_t b, int64_t e, int) {
    for (int64_t r = b; r < e; ++r) {
      float* rr = res + r * h;
      for (int64_t i = 0; i < h; ++i) rr[i] += xs[r * h + i];
      rms_norm_row(rr, weight, o + r * h, h, p.eps);
    }
  });
}

void CpuBackend::add(const Tensor& residual, const Tensor& x) {
  RL_CHECK(residual.numel() == x.numel());
  float* res = residual.f32();
  const float* xs = x.f32();
  for (int64_t i = 0; i < x.numel(); ++i) res[i] += xs[i];
}

void CpuBackend::qk_norm_rope(const Tensor& qkv, const Tensor& q_norm, const Tensor& k_norm,
                              const Tensor& positions, const RopeParams& rope, const NormParams& norm) {
  const QkvLayout& l = rope.layout;
  const int64_t t = qkv.dim(0), d = l.head_dim, half = d / 2, row = l.row();
  RL_CHECK(qkv.dim(-1) == row && d <= 1024);
  const int32_t* pos = positions.i32();
  auto apply = [&](float* v, const Tensor& nw, const float* cs, const float* sn) {
    if (nw.data) {
      float tmp[1024];
      rms_norm_row(v, nw, tmp, d, norm.eps);
      std::memcpy(v, tmp, static_cast<size_t>(d) * 4);
    }
    for (int64_t i = 0; i < half; ++i) {
      float a = v[i], b = v[i + half];
      v[i] = a * cs[i] - b * sn[i];
      v[i + half] = b * cs[i] + a * sn[i];
    }
  };
  pool_.parallel_for(t, [&](int64_t b, int64_t e, int) {
    std::vector<float> cs(static_cast<size_t>(half)), sn(static_cast<size_t>(half));
    for (int64_t r = b; r < e; ++r) {
      // As transformers: angle = float(position) * inv_freq in f32, then cos/sin in f32.
      float p = static_cast<float>(pos[r]);
      for (int64_t i = 0; i < half; ++i) {
        float ang = p * rope.inv_freq[i];
        cs[static_cast<size_t>(i)] = std::cos(ang);
        sn[static_cast<size_t>(i)] = std::sin(ang);
      }
      float* base = qkv.f32() + r * row;
      for (int64_t h = 0; h < l.num_heads; ++h) apply(base + h * d, q_norm, cs.data(), sn.data());
      for (int64_t h = 0; h < l.num_kv_heads; ++h) {
        apply(base + l.k_offset() + h * d, k_norm, cs.data(), sn.data());
      }
    }
  });
}

// An f32 cache takes the rows as they are; a bf16 cache rounds each element to nearest even (f32_to_bf16), an fp8
// one to nearest even with saturation at ±448 (f32_to_fp8_e4m3).
void CpuBackend::kv_write(const Tensor& qkv, const QkvLayout& l, const Tensor& slot_mapping,
                          const KvLayer& cache) {
  const int64_t t = qkv.dim(0), kv_row = l.num_kv_heads * l.head_dim, row = l.row();
  const int64_t num_slots = cache.k.dim(0) * cache.block_size();
  const int32_t* slots = slot_mapping.i32();
  const DType dt = cache.k.dtype;
  RL_CHECK_MSG(dt == DType::kF32 || dt == DType::kBF16 || dt == DType::kFP8E4M3, "CPU kv_write: a %s KV cache is not supported",
               std::string(dtype_name(dt)).c_str());
  RL_CHECK(cache.v.dtype == dt && cache.num_kv_heads() * cache.head_dim() == kv_row);
  const size_t es = dtype_size(dt);
  for (int64_t i = 0; i < t; ++i) {
    if (slots[i] < 0) continue;
    RL_CHECK(slots[i] < num_slots);
    const float* src = qkv.f32() + i * row;
    char* k_dst = static_cast<char*>(cache.k.data) + static_cast<size_t>(slots[i] * kv_row) * es;
    char* v_dst = static_cast<char*>(cache.v.data) + static_cast<size_t>(slots[i] * kv_row) * es;
    convert_from_f32(src + l.k_offset(), k_dst, dt, static_cast<size_t>(kv_row));
    convert_from_f32(src + l.v_offset(), v_dst, dt, static_cast<size_t>(kv_row));
  }
}

void CpuBackend::attention(const Tensor& qkv, const KvLayer& cache, const AttentionMetadata& meta,
                           const Tensor& out) {
  if (!meta.plain()) return cpu_paged_attention_window(pool_, qkv, cache, meta, out);
  cpu_paged_attention(pool_, *kern_, qkv, cache, meta, out);
}

void CpuBackend::fill_uniform(const Tensor& t, uint64_t seed, float lo, float hi) {
  const int64_t n = t.numel();
  pool_.parallel_for(n, [&](int64_t b, int64_t e, int) {
    for (int64_t i = b; i < e; ++i) {
      float v = lo + (hi - lo) * uniform_from_counter(seed, static_cast<uint64_t>(i));
      if (t.dtype == DType::kF32) t.as<float>()[i] = v;
      else t.as<uint16_t>()[i] = f32_to_bf16(v);
    }
  }, 4096);
}

void CpuBackend::silu_mul(const Tensor& gate_up, const Tensor& out) {
  int64_t inter = out.dim(-1);
  const float* gu = gate_up.f32();
  float* o = out.f32();
  pool_.parallel_for(out.rows(), [&](int64_t b, int64_t e, int) {
    for (int64_t r = b; r < e; ++r) {
      const float* g = gu + r * 2 * inter;
      kern_->silu_mul(g, g + inter, o + r * inter, inter);
    }
  });
}

void CpuBackend::gather_rows(const Tensor& x, const Tensor& indices, const Tensor& out) {
  int64_t h = x.dim(-1), n = indices.numel();
  size_t es = dtype_size(x.dtype);
  for (int64_t i = 0; i < n; ++i) {
    int32_t r = indices.i32()[i];
    RL_CHECK(r >= 0 && r < x.rows());
    std::memcpy(static_cast<char*>(out.data) + static_cast<size_t>(i * h) * es,
                static_cast<const char*>(x.data) + static_cast<size_t>(r * h) * es, static_cast<size_t>(h) * es);
  }
}

void CpuBackend::argmax_rows(const Tensor& logits, const Tensor& out) {
  const int64_t vocab = logits.dim(-1);
  for (int64_t r = 0; r < logits.rows(); ++r) {
    const float* row = logits.f32() + r * vocab;
    int32_t best = 0;
    float bv = -INFINITY;
    bool found = false, broken = false;
    for (int64_t i = 0; i < vocab; ++i) {
      broken |= !(row[i] < INFINITY);  // NaN or +Inf
      if (row[i] != row[i]) continue;
      if (!found || row[i] > bv) {
        bv = row[i];
        best = static_cast<int32_t>(i);
        found = true;
      }
    }
    out.i32()[r] = broken || !(bv > -INFINITY) ? -1 : best;
  }
}

void CpuBackend::cast(const Tensor& src, const Tensor& dst) {
  RL_CHECK(src.numel() == dst.numel());
  size_t n = static_cast<size_t>(src.numel());
  if (src.dtype == dst.dtype) {
    std::memcpy(dst.data, src.data, src.nbytes());
  } else if (dst.dtype == DType::kF32) {
    convert_to_f32(src.data, src.dtype, dst.f32(), n);
  } else {
    RL_CHECK(src.dtype == DType::kF32);
    convert_from_f32(src.f32(), dst.data, dst.dtype, n);
  }
}

}  // namespace rl
