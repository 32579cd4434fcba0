// Multi-head latent attention: the absorbed form the backend runs (W_UK folded into the query, attention over
// the latent rows, W_UV after) against the expanded form transformers computes (k_nope and v for every head from
// kv_b, ordinary attention), and the DeepSeek config checks.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "backend/cpu/cpu_backend.h"
#include "core/file.h"
#include "model/model.h"

namespace rl {
namespace {

const std::string kSource = std::string(RIDGELINE_SOURCE_DIR);

struct MlaCase {
  int64_t nh = 4, dn = 16, dr = 8, r = 32, dv = 12, bs = 4;
  std::vector<int32_t> seq_lens = {7, 1, 11};  // context per sequence (decode: one query each, the last position)
};

// out[t, h, dv] through the backend's absorbed ops, and the expanded reference in double, for decode queries.
void run_case(const MlaCase& c, float* max_err, float* max_ref) {
  CpuBackend be(2);
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.0f, 0.5f);
  auto fill = [&](std::vector<float>& v) {
    for (float& x : v) x = nd(rng);
  };
  const int64_t lat = c.r + c.dr, ns = static_cast<int64_t>(c.seq_lens.size());
  int64_t max_blocks = 0, max_k = 0;
  for (int32_t l : c.seq_lens) {
    max_blocks = std::max<int64_t>(max_blocks, (l + c.bs - 1) / c.bs);
    max_k = std::max<int64_t>(max_k, l);
  }
  const int64_t num_blocks = ns * max_blocks + 1;
  std::vector<float> cache(static_cast<size_t>(num_blocks * c.bs * lat)),
      q(static_cast<size_t>(ns * c.nh * (c.dn + c.dr)));
  std::vector<float> w_uk_t(static_cast<size_t>(c.nh * c.r * c.dn)), w_uv(static_cast<size_t>(c.nh * c.dv * c.r));
  fill(cache);
  fill(q);
  fill(w_uk_t);
  fill(w_uv);
  // Sequence s owns blocks 1 + s * max_blocks .. in reverse order (the table, not a flat layout, is read).
  std::vector<int32_t> tables(static_cast<size_t>(ns * max_blocks)), cu(static_cast<size_t>(ns + 1));
  for (int64_t s = 0; s < ns; ++s) {
    cu[static_cast<size_t>(s + 1)] = static_cast<int32_t>(s + 1);
    for (int64_t b = 0; b < max_blocks; ++b) {
      tables[static_cast<size_t>(s * max_blocks + b)] = static_cast<int32_t>(1 + s * max_blocks + (max_blocks - 1 - b));
    }
  }
  const float scale = 0.3f;
  // Absorbed: q_lat = [q_nope · W_UK, q_rope], attention over latent rows, then W_UV.
  std::vector<float> q_lat(static_cast<size_t>(ns * c.nh * lat)), o_lat(static_cast<size_t>(ns * c.nh * c.r));
  std::vector<float> out(static_cast<size_t>(ns * c.nh * c.dv));
  for (int64_t t = 0; t < ns; ++t)
    for (int64_t h = 0; h < c.nh; ++h)
      for (int64_t i = 0; i < c.dr; ++i) {
        q_lat[static_cast<size_t>((t * c.nh + h) * lat + c.r + i)] =
            q[static_cast<size_t>((t * c.nh + h) * (c.dn + c.dr) + c.dn + i)];
      }
  be.head_linear(Tensor(q.data(), DType::kF32, {ns, c.nh * (c.dn + c.dr)}), c.dn + c.dr,
                 Tensor(w_uk_t.data(), DType::kF32, {c.nh, c.r, c.dn}),
                 Tensor(q_lat.data(), DType::kF32, {ns, c.nh * lat}), lat);
  AttentionMetadata meta;
  meta.cu_seqlens_q = Tensor(cu.data(), DType::kI32, {ns + 1});
  std::vector<int32_t> lens = c.seq_lens;
  meta.seq_lens_k = Tensor(lens.data(), DType::kI32, {ns});
  meta.block_tables = Tensor(tables.data(), DType::kI32, {ns, max_blocks});
  meta.num_seqs = ns;
  meta.max_seqlen_q = 1;
  meta.max_seqlen_k = max_k;
  meta.all_decode = true;
  meta.scale = scale;
  KvLayer kv;
  kv.k = Tensor(cache.data(), DType::kF32, {num_blocks, c.bs, 1, lat});
  MlaLayout layout{c.nh, c.dn, c.dr, c.r};
  be.mla_attention(Tensor(q_lat.data(), DType::kF32, {ns, c.nh * lat}), kv, meta, layout,
                   Tensor(o_lat.data(), DType::kF32, {ns, c.nh * c.r}));
  be.head_linear(Tensor(o_lat.data(), DType::kF32, {ns, c.nh * c.r}), c.r,
                 Tensor(w_uv.data(), DType::kF32, {c.nh, c.dv, c.r}),
                 Tensor(out.data(), DType::kF32, {ns, c.nh * c.dv}), c.dv);
  // Expanded: k_nope[j, h] = W_UK[h] c_j, v[j, h] = W_UV[h] c_j, ordinary attention with k = [k_nope, k_rope].
  *max_err = 0;
  *max_ref = 0;
  for (int64_t s = 0; s < ns; ++s) {
    const int64_t n = c.seq_lens[static_cast<size_t>(s)];
    for (int64_t h = 0; h < c.nh; ++h) {
      const float* qh = q.data() + (s * c.nh + h) * (c.dn + c.dr);
      std::vector<double> sc(static_cast<size_t>(n));
      double mx = -1e300;
      for (int64_t j = 0; j < n; ++j) {
        const int64_t slot = tables[static_cast<size_t>(s * max_blocks + j / c.bs)] * c.bs + j % c.bs;
        const float* row = cache.data() + slot * lat;
        double dot = 0;
        for (int64_t d = 0; d < c.dn; ++d) {
          double k = 0;
          for (int64_t x = 0; x < c.r; ++x)
            k += static_cast<double>(w_uk_t[static_cast<size_t>((h * c.r + x) * c.dn + d)]) * row[x];
          dot += qh[d] * k;
        }
        for (int64_t i = 0; i < c.dr; ++i) dot += static_cast<double>(qh[c.dn + i]) * row[c.r + i];
        sc[static_cast<size_t>(j)] = dot * scale;
        mx = std::max(mx, sc[static_cast<size_t>(j)]);
      }
      double sum = 0;
      for (double& v : sc) sum += (v = std::exp(v - mx));
      for (int64_t o = 0; o < c.dv; ++o) {
        double acc = 0;
        for (int64_t j = 0; j < n; ++j) {
          const int64_t slot = tables[static_cast<size_t>(s * max_blocks + j / c.bs)] * c.bs + j % c.bs;
          const float* row = cache.data() + slot * lat;
          double v = 0;
          for (int64_t x = 0; x < c.r; ++x)
            v += static_cast<double>(w_uv[static_cast<size_t>((h * c.dv + o) * c.r + x)]) * row[x];
          acc += sc[static_cast<size_t>(j)] / sum * v;
        }
        const float got = out[static_cast<size_t>((s * c.nh + h) * c.dv + o)];
        *max_err = std::max(*max_err, static_cast<float>(std::abs(got - acc)));
        *max_ref = std::max(*max_ref, static_cast<float>(std::abs(acc)));
      }
    }
  }
}

TEST(Mla, AbsorbedDecodeEqualsExpandedAttention) {
  float err = 0, ref = 0;
  run_case(MlaCase{}, &err, &ref);
  EXPECT_GT(ref, 0.1f);
  EXPECT_LT(err, 2e-5f * std::max(1.0f, ref));
}

Result<ModelConfig> parse_with(const std::string& key, const Json& value) {
  auto j = load_json_file(kSource + "/tests/data/golden/deepseek_v3/config.json");
  EXPECT_TRUE(j.is_ok());
  (*j)[key] = value;
  return parse_model_config(*j, "config.json");
}

TEST(Mla, ConfigFieldsAreValidated) {
  EXPECT_TRUE(parse_with("n_group", 4).is_ok());
  auto bad_group = parse_with("n_group", 3);
  ASSERT_FALSE(bad_group.is_ok());
  EXPECT_NE(bad_group.message().find("n_group (3) must divide n_routed_experts (8)"), std::string::npos);
  auto bad_topk_group = parse_with("topk_group", 5);
  ASSERT_FALSE(bad_topk_group.is_ok());
  EXPECT_NE(bad_topk_group.message().find("topk_group"), std::string::npos);
  for (const char* key : {"kv_lora_rank", "q_lora_rank", "qk_nope_head_dim", "v_head_dim"}) {
    auto r = parse_with(key, 0);
    ASSERT_FALSE(r.is_ok()) << key;
    EXPECT_NE(r.message().find(key), std::string::npos) << r.message();
  }
  EXPECT_FALSE(parse_with("qk_rope_head_dim", 7).is_ok());
  EXPECT_FALSE(parse_with("scoring_func", "softmax").is_ok());
  EXPECT_FALSE(parse_with("num_experts_per_tok", 9).is_ok());
  // q_lora_rank null: a plain q_proj (V2-Lite).
  EXPECT_TRUE(parse_with("q_lora_rank", nullptr).is_ok());
}

TEST(Mla, KvBytesPerTokenAreTheLatent) {
  auto v3 = load_model_config(kSource + "/models/configs/DeepSeek-V3/config.json");
  ASSERT_TRUE(v3.is_ok()) << v3.message();
  // 61 layers x (512 + 64) values x 2 bytes.
  EXPECT_EQ(v3->kv_bytes_per_token(2), 61 * 576 * 2);
  EXPECT_EQ(v3->params.num_moe_layers, 58);
  auto lite = load_model_config(kSource + "/models/configs/DeepSeek-V2-Lite/config.json");
  ASSERT_TRUE(lite.is_ok()) << lite.message();
  EXPECT_EQ(lite->kv_bytes_per_token(2), 27 * 576 * 2);
  // The published shapes summed by hand: embeddings + lm_head 419,430,400, 27 MLA layers of 13,767,168 (norms
  // included), one dense MLP 67,239,936, 26 MoE layers of 571,080,704 (router, 64 experts, 2 shared), final norm.
  EXPECT_EQ(lite->num_params(), 15706484224);
}

}  // namespace
}  // namespace rl
