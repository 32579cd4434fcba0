// Multi-head latent attention on the CPU (reference): the latent cache write with RoPE and the kv_a RMSNorm,
// per-head projections (W_UK into the query, W_UV out of the latent) and causal attention over the latent rows.
// The latent cache holds f32, bf16 or fp8 e4m3 (rows rounded once when written, widened exactly to f32 when read).
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"

namespace rl {

namespace {

float weight_at(const Tensor& w, int64_t i) {
  return w.dtype == DType::kF32 ? w.as<float>()[i] : bf16_to_f32(w.as<uint16_t>()[i]);
}

// dst[0, half) and dst[half, d): rotate-half order; src pairs interleaved or already split in halves.
void rope_into(const float* src, float* dst, int64_t d, bool interleaved, const float* cs, const float* sn,
               float scale) {
  const int64_t half = d / 2;
  for (int64_t i = 0; i < half; ++i) {
    const float a = interleaved ? src[2 * i] : src[i], b = interleaved ? src[2 * i + 1] : src[i + half];
    dst[i] = (a * cs[i] - b * sn[i]) * scale;
    dst[i + half] = (b * cs[i] + a * sn[i]) * scale;
  }
}

}  // namespace

void CpuBackend::mla_prepare(const Tensor& q, const Tensor& ckv, const Tensor& kv_norm, const Tensor& positions,
                             const Tensor& slot_mapping, const MlaRopeParams& p, const Tensor& q_lat,
                             const KvLayer& cache) {
  const MlaLayout& l = p.layout;
  const int64_t t = q.dim(0), nh = l.num_heads, r = l.kv_lora_rank, dr = l.rope_dim, lat = l.latent();
  RL_CHECK(q.dim(1) == nh * l.q_head() && ckv.dim(1) == lat && q_lat.dim(1) == nh * lat && dr % 2 == 0);
  const DType dt = cache.k.dtype;
  RL_CHECK_MSG(dt == DType::kF32 || dt == DType::kBF16 || dt == DType::kFP8E4M3, "CPU mla_prepare: a %s KV cache is not supported",
               std::string(dtype_name(dt)).c_str());
  RL_CHECK(cache.head_dim() == lat && cache.num_kv_heads() == 1);
  const int64_t num_slots = cache.k.dim(0) * cache.block_size();
  const int32_t* pos = positions.i32();
  const int32_t* slots = slot_mapping.i32();
  pool_.parallel_for(t, [&](int64_t b, int64_t e, int) {
    std::vector<float> cs(static_cast<size_t>(dr / 2)), sn(cs.size()), dst(static_cast<size_t>(lat));
    for (int64_t row = b; row < e; ++row) {
      const float fp = static_cast<float>(pos[row]);
      for (int64_t i = 0; i < dr / 2; ++i) {
        const float ang = fp * p.inv_freq[i];
        cs[static_cast<size_t>(i)] = std::cos(ang);
        sn[static_cast<size_t>(i)] = std::sin(ang);
      }
      for (int64_t h = 0; h < nh; ++h) {
        rope_into(q.f32() + row * nh * l.q_head() + h * l.q_head() + l.nope_dim, q_lat.f32() + (row * nh + h) * lat + r,
                  dr, p.interleaved, cs.data(), sn.data(), p.q_rope_scale);
      }
      const int32_t slot = slots[row];
      if (slot < 0) continue;
      RL_CHECK(slot < num_slots);
      const float* c = ckv.f32() + row * lat;
      double ss = 0;
      for (int64_t i = 0; i < r; ++i) ss += static_cast<double>(c[i]) * c[i];
      const float inv = 1.0f / std::sqrt(static_cast<float>(ss / static_cast<double>(r)) + p.eps);
      for (int64_t i = 0; i < r; ++i) dst[static_cast<size_t>(i)] = weight_at(kv_norm, i) * (c[i] * inv);
      rope_into(c + r, dst.data() + r, dr, p.interleaved, cs.data(), sn.data(), 1.0f);
      convert_from_f32(dst.data(), static_cast<char*>(cache.k.data) + static_cast<size_t>(slot * lat) * dtype_size(dt),
                       dt, static_cast<size_t>(lat));
    }
  });
}

void CpuBackend::head_linear(const Tensor& x, int64_t x_stride, const Tensor& w, const Tensor& y, int64_t y_stride) {
  const int64_t t = x.dim(0), nb = w.dim(0), n = w.dim(1), k = w.dim(2);
  RL_CHECK(x.dim(1) == nb * x_stride && y.dim(1) == nb * y_stride && k <= x_stride && n <= y_stride);
  std::vector<float> xs(static_cast<size_t>(t * k)), ys(static_cast<size_t>(t * n));
  const size_t es = dtype_size(w.dtype);
  for (int64_t b = 0; b < nb; ++b) {
    for (int64_t i = 0; i < t; ++i) {
      std::copy_n(x.f32() + i * nb * x_stride + b * x_stride, k, xs.data() + i * k);
    }
    Tensor wb(static_cast<char*>(w.data) + static_cast<size_t>(b * n * k) * es, w.dtype, {n, k});
    linear(Tensor(xs.data(), DType::kF32, {t, k}), wb, Tensor(), Tensor(ys.data(), DType::kF32, {t, n}));
    for (int64_t i = 0; i < t; ++i) {
      std::copy_n(ys.data() + i * n, n, y.f32() + i * nb * y_stride + b * y_stride);
    }
  }
}

namespace {

// KV: the latent cache's element type (float: f32, uint16_t: bf16 bits).
template <typename KV>
void mla_attention_rows(ThreadPool& pool, const CpuKernels& kern, const Tensor& q_lat, const KvLayer& cache,
                        const AttentionMetadata& meta, const MlaLayout& l, const Tensor& out) {
  const int64_t nh = l.num_heads, lat = l.latent(), r = l.kv_lora_rank, bs = cache.block_size();
  const int64_t max_blocks = meta.block_tables.dim(1), num_tokens = q_lat.dim(0);
  const int32_t* cu = meta.cu_seqlens_q.i32();
  const int32_t* seq_lens = meta.seq_lens_k.i32();
  const int32_t* tables = meta.block_tables.i32();
  const KV* kc = cache.k.as<KV>();
  const std::vector<int32_t> seq_of = cpu_sequence_of_tokens(meta, num_tokens);
  pool.parallel_for(num_tokens * nh, [&](int64_t b, int64_t e, int) {
    std::vector<float> scores(static_cast<size_t>(meta.max_seqlen_k)), acc(static_cast<size_t>(r));
    for (int64_t task = b; task < e; ++task) {
      const int64_t tok = task / nh, h = task % nh;
      const int32_t s = seq_of[static_cast<size_t>(tok)];
      const int64_t pos = seq_lens[s] - (cu[s + 1] - cu[s]) + (tok - cu[s]), nk = pos + 1;
      RL_CHECK((nk + bs - 1) / bs <= max_blocks && nk <= meta.max_seqlen_k);
      const float* qv = q_lat.f32() + (tok * nh + h) * lat;
      const int32_t* table = tables + s * max_blocks;
      float mx = -INFINITY;
      for (int64_t j = 0; j < nk; ++j) {
        const int64_t slot = static_cast<int64_t>(table[j / bs]) * bs + j % bs;
        scores[static_cast<size_t>(j)] = kv_dot(kern, qv, kc + slot * lat, lat) * meta.scale;
        mx = std::max(mx, scores[static_cast<size_t>(j)]);
      }
      float sum = 0;
      for (int64_t j = 0; j < nk; ++j) {
        const float pj = std::exp(scores[static_cast<size_t>(j)] - mx);
        scores[static_cast<size_t>(j)] = pj;
        sum += pj;
      }
      std::fill(acc.begin(), acc.end(), 0.0f);
      for (int64_t j = 0; j < nk; ++j) {
        const int64_t slot = static_cast<int64_t>(table[j / bs]) * bs + j % bs;
        kv_axpy(kern, scores[static_cast<size_t>(j)], kc + slot * lat, acc.data(), r);
      }
      float* o = out.f32() + (tok * nh + h) * r;
      const float inv = 1.0f / sum;
      for (int64_t c = 0; c < r; ++c) o[c] = acc[static_cast<size_t>(c)] * inv;
    }
  });
}

}  // namespace

void CpuBackend::mla_attention(const Tensor& q_lat, const KvLayer& cache, const AttentionMetadata& meta,
                               const MlaLayout& l, const Tensor& out) {
  const int64_t nh = l.num_heads, lat = l.latent(), r = l.kv_lora_rank;
  RL_CHECK(cache.head_dim() == lat && q_lat.dim(1) == nh * lat && out.dim(1) == nh * r);
  switch (cache.k.dtype) {
    case DType::kF32:
      return mla_attention_rows<float>(pool_, *kern_, q_lat, cache, meta, l, out);
    case DType::kBF16:
      return mla_attention_rows<uint16_t>(pool_, *kern_, q_lat, cache, meta, l, out);
    case DType::kFP8E4M3:
      return mla_attention_rows<uint8_t>(pool_, *kern_, q_lat, cache, meta, l, out);
    default:
      RL_CHECK_MSG(false, "CPU mla_attention: a %s KV cache is not supported (f32, bf16 or fp8)",
                   std::string(dtype_name(cache.k.dtype)).c_str());
  }
}

}  // namespace rl
