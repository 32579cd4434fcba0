// The roofline cost model against hand calculations for the shapes in models/configs/.
#include <gtest/gtest.h>

#include <string>

#include "loader/model_config.h"
#include "model/model.h"
#include "perf/cost_model.h"
#include "perf/hardware.h"

namespace rl::perf {
namespace {

ModelConfig load(const std::string& name) {
  auto c = load_model_config(std::string(RIDGELINE_SOURCE_DIR) + "/models/configs/" + name + "/config.json");
  EXPECT_TRUE(c.is_ok()) << c.message();
  return c.is_ok() ? *c : ModelConfig{};
}

// The measured H200 roof: 4.25 TB/s, 756 TFLOP/s bf16.
Roof h200() { return {4.25e12, 756e12}; }

TEST(PerfCostModel, Llama31_8B_ByHand) {
  ModelCost m = make_model_cost(load("Llama-3.1-8B"), Precision::kBf16, Precision::kBf16);
  // embed 128256*4096 = 525,336,576 (and again for the untied lm_head).
  // layer: q 4096*4096 = 16,777,216; k, v 4096*1024 = 4,194,304 each; o 16,777,216;
  //        gate/up/down 3*4096*14336 = 176,160,768; two norms 8,192 → 218,112,000; x32 = 6,979,584,000.
  // total = 2*525,336,576 + 6,979,584,000 + 4,096 (final norm) = 8,030,261,248 (transformers: 8.03 B).
  EXPECT_EQ(m.num_params, 8030261248);
  // matmuls: 32 * (218,112,000 - 8,192) + lm_head 525,336,576 = 7,504,658,432.
  EXPECT_EQ(m.matmul_params, 7504658432);
  EXPECT_EQ(m.weight_bytes, 2 * 8030261248LL);
  // K and V: 2 * 32 layers * 8 kv heads * 128 * 2 bytes = 131,072.
  EXPECT_EQ(m.kv_bytes_per_token, 131072);
  // 32 layers * 4 * 4096 * 2 bytes + 128256 * 4 bytes of logits = 1,048,576 + 513,024.
  EXPECT_EQ(m.activation_bytes_per_token, 1561600);
  // One query, one key: QK^T 2*128 + PV 2*128 per head, 32 heads, 32 layers = 524,288.
  EXPECT_EQ(m.attention_flops_per_key, 524288);
  // Decode at context 1024: 2*7,504,658,432 + 524,288*1024 = 15,009,316,864 + 536,870,912.
  EXPECT_DOUBLE_EQ(m.decode_flops_per_token(1024), 15546187776.0);
  EXPECT_DOUBLE_EQ(m.attention_flops(1024), 536870912.0);
  // Prefill of 512 (causal), lm_head (525,336,576) and the last layer's o_proj and MLP (16,777,216 + 3*4096*14336
  // = 192,937,984) for the last token only, and that layer's attention for it alone: 512*2*(7,504,658,432 -
  // 718,274,560) + 2*718,274,560 + 16,384 * (31 * 512*513/2 + 512) = 6,949,257,084,928 + 1,436,549,120
  // + 66,710,405,120.
  EXPECT_EQ(m.logits_params, 525336576);
  EXPECT_EQ(m.last_rows_params, 192937984);
  EXPECT_TRUE(m.last_attention_rows);
  EXPECT_DOUBLE_EQ(m.prefill_flops(512), 7017404039168.0);
  // Its bytes: the weights, 512 tokens' K/V, the layers' activations of 512 tokens and one logits row.
  const StepCost p = prefill_step(m, h200(), 512);
  EXPECT_DOUBLE_EQ(p.bytes, 2.0 * 8030261248 + 512.0 * 131072 + 512.0 * 1048576 + 513024);
}

TEST(PerfCostModel, Qwen3_0_6B_TiedEmbeddings) {
  ModelCost m = make_model_cost(load("Qwen3-0.6B"), Precision::kBf16, Precision::kBf16);
  // embed 151936*1024 = 155,582,464, counted once (tied).
  // layer: q 1024*2048 = 2,097,152; k, v 1024*1024 = 1,048,576 each; o 2048*1024 = 2,097,152 → 6,291,456;
  //        q/k norms 2*128 = 256; MLP 3*1024*3072 = 9,437,184; norms 2,048
  //        → 15,730,944; x28 = 440,466,432. Total = 440,466,432 + 155,582,464 + 1,024 = 596,049,920.
  EXPECT_EQ(m.num_params, 596049920);
  // matmuls: 28 * (6,291,456 + 9,437,184) + lm_head (the tied embedding) 155,582,464 = 595,984,384.
  EXPECT_EQ(m.matmul_params, 595984384);
  // 2 * 28 * 8 * 128 * 2 = 114,688.
  EXPECT_EQ(m.kv_bytes_per_token, 114688);
  // 28 layers * 16 heads * 4 * 128 = 229,376.
  EXPECT_EQ(m.attention_flops_per_key, 229376);
}

TEST(PerfCostModel, OtherConfigsMatchTransformersCounts) {
  // Qwen2.5-7B: layer = q 12,845,056 + k/v 2*1,835,008 + o 12,845,056 + qkv bias 3584+2*512 + MLP 3*3584*18944
  // (203,685,888) + norms 7,168 = 233,057,792; x28 = 6,525,618,176; embed + lm_head 2*152064*3584 =
  // 1,089,994,752; final norm 3,584 → 7,615,616,512.
  EXPECT_EQ(make_model_cost(load("Qwen2.5-7B"), Precision::kBf16, Precision::kBf16).num_params, 7615616512);
  // Mistral-7B: Llama-8B's layers (32 * 218,112,000) + 2*32768*4096 + 4096 = 7,248,023,552.
  EXPECT_EQ(make_model_cost(load("Mistral-7B"), Precision::kBf16, Precision::kBf16).num_params, 7248023552);
  // Qwen3-8B: layer 41,943,040 + 256 + 150,994,944 + 8,192 = 192,946,432; x36 = 6,946,071,552;
  // + 2*151936*4096 = 1,244,659,712 + 4,096 → 8,190,735,360.
  EXPECT_EQ(make_model_cost(load("Qwen3-8B"), Precision::kBf16, Precision::kBf16).num_params, 8190735360);
}

// gpt-oss-20b: 24 layers of 8 KV heads x 64 (K and V: 2048 bytes per token in bf16), alternating window 128 and
// full. The hybrid KV cache keeps a block of 12 layer slots per 16 tokens: half the bytes of all 24 layers.
TEST(PerfCostModel, GptOssHybridKvGroupsHalveTheCachePerToken) {
  ModelCost m = make_model_cost(load("gpt-oss-20b"), Precision::kBf16, Precision::kBf16);
  EXPECT_EQ(m.kv_bytes_per_token, 49152);
  EXPECT_EQ(m.kv_cache_bytes_per_token, 24576);
  ASSERT_EQ(m.kv_groups.size(), 2u);
  EXPECT_EQ(m.kv_groups[0].window, 0);
  EXPECT_EQ(m.kv_groups[0].num_layers, 12);
  EXPECT_EQ(m.kv_groups[1].window, 128);
  EXPECT_EQ(m.kv_groups[1].bytes_per_token, 24576);
  // A model of one kind of layer has no groups and caches every layer.
  ModelCost llama = make_model_cost(load("Llama-3.1-8B"), Precision::kBf16, Precision::kBf16);
  EXPECT_TRUE(llama.kv_groups.empty());
  EXPECT_EQ(llama.kv_cache_bytes_per_token, llama.kv_bytes_per_token);
}

TEST(PerfCostModel, Fp8WeightsAndKv) {
  ModelCost m = make_model_cost(load("Llama-3.1-8B"), Precision::kFp8, Precision::kFp8);
  // Linear layers 6,979,321,856 at 1 byte; the other 1,050,939,392 parameters (embeddings, lm_head, norms) at 2.
  EXPECT_EQ(m.weight_bytes, 6979321856LL + 2 * 1050939392LL);
  EXPECT_EQ(m.kv_bytes_per_token, 65536);
  EXPECT_EQ(m.num_params, 8030261248);
}

TEST(PerfCostModel, DecodeBatch1IsBandwidthOverBytes) {
  ModelCost m = make_model_cost(load("Llama-3.1-8B"), Precision::kBf16, Precision::kBf16);
  StepCost s = decode_step(m, h200(), 1, 1024);
  // bytes = 16,060,522,496 + 1024*131,072 + 1,561,600 = 16,196,301,824; / 4.25e12 = 3.8109 ms → 262.41 tok/s.
  EXPECT_DOUBLE_EQ(s.bytes, 16196301824.0);
  EXPECT_FALSE(s.compute_bound);
  EXPECT_NEAR(s.tokens_per_s(), 262.4056, 1e-3);
  // Within rounding of bandwidth / (weights + KV), the activations being 0.01 % of the bytes.
  EXPECT_NEAR(s.tokens_per_s(), 4.25e12 / (16060522496.0 + 1024 * 131072.0), 0.05);
  // Batch 64: 64 sequences read 64x the KV but the weights once.
  StepCost s64 = decode_step(m, h200(), 64, 1024);
  EXPECT_DOUBLE_EQ(s64.bytes, 16060522496.0 + 64 * (1024 * 131072.0 + 1561600));
  EXPECT_DOUBLE_EQ(s64.flops, 64 * 15546187776.0);
  EXPECT_NEAR(s64.time_s, s64.bytes / 4.25e12, 1e-15);
}

TEST(PerfCostModel, PrefillTtftIsComputeBound) {
  ModelCost m = make_model_cost(load("Llama-3.1-8B"), Precision::kBf16, Precision::kBf16);
  StepCost p = prefill_step(m, h200(), 512);
  // 7,017,404,039,168 FLOPs / 756e12 = 9.282 ms, against 16.67 GB / 4.25 TB/s = 3.92 ms of bytes.
  EXPECT_TRUE(p.compute_bound);
  EXPECT_NEAR(p.time_s, 7017404039168.0 / 756e12, 1e-12);
  EXPECT_NEAR(p.time_s * 1e3, 9.282, 1e-3);
  // A 1-token "prefill" is a batch-1 decode over its own key: memory-bound, weights / bandwidth.
  StepCost one = prefill_step(m, h200(), 1);
  EXPECT_FALSE(one.compute_bound);
  EXPECT_NEAR(one.time_s, (16060522496.0 + 131072 + 1561600) / 4.25e12, 1e-12);
}

// bench latency's TTFT is a mean over requests submitted at once: its bound is the prompts served one after another.
TEST(PerfCostModel, BatchMeanTtftServesPromptsOneAfterAnother) {
  ModelCost m = make_model_cost(load("Llama-3.1-8B"), Precision::kBf16, Precision::kBf16);
  const StepCost p = prefill_step(m, h200(), 512);
  EXPECT_NEAR(batch_mean_ttft_s(p, h200(), 1), p.time_s, 1e-12);
  // 16 prompts: a mean of 8.5 prompts' FLOPs (9.282 ms each), not the whole batch's 16.
  EXPECT_NEAR(batch_mean_ttft_s(p, h200(), 16), 8.5 * 7017404039168.0 / 756e12, 1e-12);
  // Short prompts are bandwidth-bound: the weights stream at least once, whatever the batch.
  const StepCost one = prefill_step(m, h200(), 1);
  EXPECT_NEAR(batch_mean_ttft_s(one, h200(), 4), one.bytes / 4.25e12, 1e-12);
}

TEST(PerfCostModel, ComputeBoundBatch) {
  ModelCost llama = make_model_cost(load("Llama-3.1-8B"), Precision::kBf16, Precision::kBf16);
  // Matmuls alone: B * (15,009,316,864 / 756e12 - 1,561,600 / 4.25e12) >= 16,060,522,496 / 4.25e12
  // → B >= 3.77895e-3 / 1.94862e-5 = 193.93 → 194; near the ridge figure 177.88 * 16.06 GB / 15.01 GFLOP = 190.3.
  auto b0 = compute_bound_batch(llama, h200(), 0);
  ASSERT_TRUE(b0.has_value());
  EXPECT_EQ(*b0, 194);
  // At context 1024 each sequence reads 134 MB of KV (31.6 us at 4.25 TB/s) for 15.5 GFLOP (20.6 us at
  // 756 TFLOP/s): decode never turns compute-bound.
  EXPECT_FALSE(compute_bound_batch(llama, h200(), 1024).has_value());

  ModelCost qwen = make_model_cost(load("Qwen3-0.6B"), Precision::kBf16, Precision::kBf16);
  // Context 16: per sequence 1,191,968,768 + 229,376*16 FLOPs (1.58153 us) and 16*114,688 + 837,120 bytes
  // (0.62874 us); weights 1,192,099,840 B (280.494 us) → B >= 280.494 / 0.95279 = 294.39 → 295.
  auto b16 = compute_bound_batch(qwen, h200(), 16);
  ASSERT_TRUE(b16.has_value());
  EXPECT_EQ(*b16, 295);
  EXPECT_FALSE(decode_step(qwen, h200(), 294, 16).compute_bound);
  EXPECT_TRUE(decode_step(qwen, h200(), 295, 16).compute_bound);
}

TEST(PerfCostModel, SequencesThatFit) {
  ModelCost m = make_model_cost(load("Llama-3.1-8B"), Precision::kBf16, Precision::kBf16);
  // (141e9 - 16,060,522,496) * 0.9 / (1024 * 131,072) = 112,445,529,754 / 134,217,728 = 837.78 → 837.
  EXPECT_EQ(max_sequences(m, 141e9, 0.9, 1024), 837);
  // 8k context: 837.78 / 8 = 104.7 → 104.
  EXPECT_EQ(max_sequences(m, 141e9, 0.9, 8192), 104);
  // A 24 GB card at full utilization: (24e9 - 16.06e9) / (4096 * 131,072) = 14.79 → 14.
  EXPECT_EQ(max_sequences(m, 24e9, 1.0, 4096), 14);
  // Weights larger than memory: nothing fits.
  EXPECT_EQ(max_sequences(m, 16e9, 0.9, 1024), 0);
}

TEST(PerfCostModel, RoofUsesFp8RateOnlyWhereThereIsOne) {
  GpuSpec h100 = find_gpu("H100 SXM").value();
  EXPECT_DOUBLE_EQ(make_roof(h100, Precision::kBf16).peak_flops_per_s, 989.4e12);
  EXPECT_DOUBLE_EQ(make_roof(h100, Precision::kFp8).peak_flops_per_s, 1978.9e12);
  GpuSpec a100 = find_gpu("A100 80GB").value();
  EXPECT_DOUBLE_EQ(make_roof(a100, Precision::kFp8).peak_flops_per_s, 312e12);
  // Ridge of the measured H200: 756 / 4.25 = 177.88 FLOP/byte.
  EXPECT_NEAR(make_roof(measured_h200(), Precision::kBf16).ridge_intensity(), 177.882, 1e-3);
}

TEST(PerfCostModel, PrecisionNames) {
  EXPECT_EQ(parse_precision("fp8", "--dtype").value(), Precision::kFp8);
  EXPECT_EQ(parse_precision("bf16", "--dtype").value(), Precision::kBf16);
  auto bad = parse_precision("int4", "--kv-dtype");
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.message().find("--kv-dtype must be bf16 or fp8"), std::string::npos) << bad.message();
}

}  // namespace
}  // namespace rl::perf
