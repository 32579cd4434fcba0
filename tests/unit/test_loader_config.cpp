// config.json / generation_config.json parsing: the real configs in models/configs, and clear errors.
#include <gtest/gtest.h>

#include "core/json.h"
#include "loader/config_fields.h"
#include "loader/model_config.h"
#include "model/model.h"

namespace rl {
namespace {

const std::string kConfigs = std::string(RIDGELINE_SOURCE_DIR) + "/models/configs/";

ModelConfig load(const std::string& name) {
  auto r = load_model_config(kConfigs + name + "/config.json");
  EXPECT_TRUE(r.is_ok()) << r.message();
  return r.is_ok() ? r.value() : ModelConfig{};
}

std::string parse_error(const std::string& text) {
  auto j = parse_json(text, "config.json");
  if (!j.is_ok()) return j.message();
  auto r = parse_model_config(*j);
  EXPECT_FALSE(r.is_ok()) << text;
  return r.is_ok() ? "" : r.message();
}

TEST(ModelConfigTest, RealConfigsAndParameterCounts) {
  ModelConfig l = load("Llama-3.1-8B");
  EXPECT_EQ(l.num_params(), 8030261248);  // transformers' count
  EXPECT_EQ(l.kv_bytes_per_token(2), 131072);
  EXPECT_EQ(l.head_dim, 128);
  EXPECT_EQ(l.rope_scaling.type, RopeScalingType::kLlama3);
  EXPECT_EQ(l.eos_token_ids, (std::vector<int64_t>{128001, 128008, 128009}));
  ModelConfig q = load("Qwen3-0.6B");
  EXPECT_EQ(q.num_params(), 596049920);
  EXPECT_TRUE(q.qk_norm && q.tie_word_embeddings);
  EXPECT_EQ(q.head_dim, 128);  // explicit, != 1024 / 16
  ModelConfig q2 = load("Qwen2.5-7B");
  EXPECT_EQ(q2.num_params(), 7615616512);
  EXPECT_TRUE(q2.qkv_bias && !q2.o_bias);
  EXPECT_EQ(q2.sliding_window, 0);  // use_sliding_window false
  EXPECT_EQ(load("Qwen3-8B").num_params(), 8190735360);
  EXPECT_EQ(load("Mistral-7B").num_params(), 7248023552);
}

// The published totals (transformers' count) of the new architectures, active parameters of the MoE ones and
// the KV spec with GPT-OSS's alternating windows.
TEST(ModelConfigTest, NewArchitecturesCountsAndKvSpec) {
  ModelConfig g = load("gpt2");
  EXPECT_EQ(g.num_params(), 124439808);
  EXPECT_TRUE(g.tie_word_embeddings);
  EXPECT_EQ(g.kv_bytes_per_token(2), 12 * 2 * 768 * 2);
  ModelConfig q = load("Qwen3-30B-A3B");
  EXPECT_EQ(q.num_params(), 30532122624);
  EXPECT_EQ(q.params.num_moe_layers, 48);
  EXPECT_EQ(q.params.experts_per_tok, 8);
  EXPECT_EQ(q.params.active_matmul, 3041656832);  // attention + router + 8 of 128 experts + lm_head
  ModelConfig o = load("gpt-oss-20b");
  EXPECT_EQ(o.num_params(), 20914757184);
  EXPECT_EQ(load("gpt-oss-120b").num_params(), 116829156672);
  ASSERT_EQ(o.kv_spec.size(), 24u);
  EXPECT_EQ(o.kv_spec[0].kind, KvKind::kSliding);
  EXPECT_EQ(o.kv_spec[0].window, 128);
  EXPECT_EQ(o.kv_spec[1].kind, KvKind::kFull);
  EXPECT_EQ(o.kv_bytes_per_token(2), 24 * 2 * 8 * 64 * 2);
  // At 32k tokens the 12 window layers hold 128 positions each.
  EXPECT_EQ(o.kv_bytes_at(32768, 2), 12 * 2048 * (32768 + 128));
  EXPECT_EQ(o.rope_scaling.type, RopeScalingType::kYarn);
  EXPECT_EQ(o.notes.size(), 1u);  // MXFP4 dequantised at load
  // DeepSeek-V3: every layer caches one MLA latent (512 + 64), 58 of 61 layers are MoE; FP8 and MTP noted.
  auto d = load_model_config(kConfigs + "DeepSeek-V3/config.json");
  ASSERT_TRUE(d.is_ok()) << d.message();
  ASSERT_EQ(d->kv_spec.size(), 61u);
  EXPECT_EQ(d->kv_spec[0].kind, KvKind::kLatent);
  EXPECT_EQ(d->kv_spec[0].latent_dim, 576);
  EXPECT_EQ(d->params.num_moe_layers, 58);
  EXPECT_EQ(d->notes.size(), 2u);
  // An unknown architecture: a clear error listing the supported ones.
  auto u = parse_model_config(Json::parse(R"({"architectures":["FooForCausalLM"]})"));
  ASSERT_FALSE(u.is_ok());
  EXPECT_NE(u.message().find("DeepseekV3ForCausalLM"), std::string::npos);
  EXPECT_NE(u.message().find("GptOssForCausalLM"), std::string::npos);
}

TEST(ModelConfigTest, MoeAndGptOssErrors) {
  const std::string moe =
      R"({"architectures":["Qwen3MoeForCausalLM"],"hidden_size":64,"intermediate_size":128,"num_hidden_layers":2,)"
      R"("num_attention_heads":4,"vocab_size":100,"moe_intermediate_size":32,"num_experts":8,)";
  EXPECT_NE(parse_error(moe + R"("num_experts_per_tok":9})").find("num_experts_per_tok"), std::string::npos);
  EXPECT_NE(parse_error(moe + R"("num_experts_per_tok":2,"mlp_only_layers":[5]})").find("mlp_only_layers"),
            std::string::npos);
  EXPECT_NE(parse_error(moe + R"("num_experts_per_tok":2,"decoder_sparse_step":0})").find("decoder_sparse_step"),
            std::string::npos);
  const std::string oss =
      R"({"architectures":["GptOssForCausalLM"],"hidden_size":64,"intermediate_size":64,"num_hidden_layers":2,)"
      R"("num_attention_heads":4,"vocab_size":100,"num_local_experts":4,"num_experts_per_tok":2,)";
  EXPECT_NE(parse_error(oss + R"("layer_types":["full_attention"]})").find("layer_types"), std::string::npos);
  EXPECT_NE(parse_error(oss + R"("quantization_config":{"quant_method":"gptq"}})").find("gptq"), std::string::npos);
  EXPECT_NE(parse_error(R"({"architectures":["GPT2LMHeadModel"],"n_embd":64,"n_layer":2,"n_head":4,)"
                        R"("vocab_size":100,"activation_function":"relu"})")
                .find("relu"),
            std::string::npos);
}

TEST(ModelConfigTest, ClearErrors) {
  const std::string base =
      R"("hidden_size":64,"intermediate_size":128,"num_hidden_layers":2,"num_attention_heads":4,"vocab_size":100)";
  EXPECT_NE(parse_error(R"({"architectures":["FalconForCausalLM"],)" + base + "}").find("Qwen3ForCausalLM"),
            std::string::npos);
  EXPECT_NE(parse_error(R"({"architectures":["LlamaForCausalLM"],"hidden_size":64})").find("\"vocab_size\""),
            std::string::npos);
  EXPECT_NE(parse_error(R"({"architectures":["LlamaForCausalLM"],"rope_scaling":{"rope_type":"longrope","factor":4},)" +
                        base + "}")
                .find("longrope"),
            std::string::npos);
  EXPECT_NE(parse_error(R"({"architectures":["LlamaForCausalLM"],"num_key_value_heads":3,)" + base + "}")
                .find("multiple"),
            std::string::npos);
  EXPECT_NE(parse_error(R"({"architectures":["LlamaForCausalLM"],"hidden_act":"gelu",)" + base + "}").find("gelu"),
            std::string::npos);
  EXPECT_NE(parse_error(R"({"architectures":["LlamaForCausalLM"],"vocab_size":"many","hidden_size":64})")
                .find("must be an integer"),
            std::string::npos);
  EXPECT_NE(parse_error(R"({"architectures":[]})").find("architectures"), std::string::npos);
  EXPECT_NE(parse_error("{not json").find("malformed"), std::string::npos);
}

TEST(ModelConfigTest, SlidingWindowCapsContext) {
  auto j = parse_json(R"({"architectures":["MistralForCausalLM"],"hidden_size":64,"intermediate_size":128,)"
                      R"("num_hidden_layers":2,"num_attention_heads":4,"vocab_size":100,)"
                      R"("max_position_embeddings":32768,"sliding_window":4096})",
                      "config.json");
  ASSERT_TRUE(j.is_ok());
  auto c = parse_model_config(*j);
  ASSERT_TRUE(c.is_ok()) << c.message();
  EXPECT_EQ(c->max_context_len(), 4096);
}

TEST(GenerationConfigTest, EosListOrSingle) {
  auto j = parse_json(R"({"eos_token_id":[1,2],"temperature":0.6,"top_p":0.9,"top_k":20,"do_sample":true})", "g");
  ASSERT_TRUE(j.is_ok());
  auto g = parse_generation_config(*j);
  ASSERT_TRUE(g.is_ok()) << g.message();
  EXPECT_EQ(g->eos_token_ids, (std::vector<int64_t>{1, 2}));
  EXPECT_DOUBLE_EQ(g->temperature, 0.6);
  EXPECT_EQ(g->top_k, 20);
  auto j2 = parse_json(R"({"eos_token_id":7})", "g");
  EXPECT_EQ(parse_generation_config(*j2)->eos_token_ids, (std::vector<int64_t>{7}));
  auto j3 = parse_json(R"({"eos_token_id":"x"})", "g");
  EXPECT_FALSE(parse_generation_config(*j3).is_ok());
}

// Every numeric field is range-checked and the error names the key, the range and the value.
TEST(ModelConfigTest, RangesNamedInErrors) {
  const std::string arch = R"({"architectures":["LlamaForCausalLM"],)";
  const std::string base =
      R"("hidden_size":64,"intermediate_size":128,"num_hidden_layers":2,"num_attention_heads":4,"vocab_size":100)";
  const auto err = [&](const std::string& extra) { return parse_error(arch + extra + base + "}"); };
  EXPECT_NE(err(R"("head_dim":0,)").find("\"head_dim\" must be an integer in [1, 1024], got 0"), std::string::npos);
  EXPECT_NE(err(R"("max_position_embeddings":0,)").find("\"max_position_embeddings\" must be an integer in [1, "),
            std::string::npos);
  EXPECT_NE(err(R"("max_position_embeddings":-5,)").find("got -5"), std::string::npos);
  EXPECT_NE(err(R"("rope_parameters":"fast",)").find("\"rope_parameters\" must be an object or null"),
            std::string::npos);
  EXPECT_NE(err(R"("rope_scaling":[1],)").find("\"rope_scaling\" must be an object"), std::string::npos);
  EXPECT_NE(err(R"("rope_theta":-1,)").find("\"rope_theta\" must be a number in (0, "), std::string::npos);
  EXPECT_NE(err(R"("rms_norm_eps":0,)").find("rms_norm_eps"), std::string::npos);
  EXPECT_NE(err(R"("sliding_window":-1,)").find("sliding_window"), std::string::npos);
  EXPECT_NE(err(R"("num_key_value_heads":0,)").find("[1, 1024]"), std::string::npos);
  EXPECT_NE(err(R"("eos_token_id":[1,-2],)").find("eos_token_id"), std::string::npos);
  EXPECT_NE(err(R"("bos_token_id":1e300,)").find("bos_token_id"), std::string::npos);
  EXPECT_NE(err(R"("model_type":7,)").find("\"model_type\" must be a string"), std::string::npos);
  EXPECT_NE(err(R"("rope_parameters":{"rope_type":"llama3","factor":8,"low_freq_factor":1,"high_freq_factor":4,)"
                R"("original_max_position_embeddings":0},)")
                .find("original_max_position_embeddings"),
            std::string::npos);
  EXPECT_NE(parse_error(arch + R"("hidden_size":99999999,"intermediate_size":128,"num_hidden_layers":2,)"
                               R"("num_attention_heads":4,"vocab_size":100})")
                .find("\"hidden_size\" must be an integer in [1, 131072]"),
            std::string::npos);
  EXPECT_NE(parse_error(arch + R"("hidden_size":4096,"intermediate_size":128,"num_hidden_layers":2,)"
                               R"("num_attention_heads":2,"vocab_size":100})")
                .find("head_dim (hidden_size / num_attention_heads)"),
            std::string::npos);
  EXPECT_NE(parse_error(arch + R"("hidden_size":64,"intermediate_size":128,"num_hidden_layers":18446744073709551615,)"
                               R"("num_attention_heads":4,"vocab_size":100})")
                .find("num_hidden_layers"),
            std::string::npos);
}

TEST(ConfigFieldsTest, ReadsAndRejects) {
  auto j = parse_json(R"({"a":3,"b":4.0,"c":"x","d":null,"e":1.5,"f":{"g":1},"h":[1,2],"i":true})", "t");
  ASSERT_TRUE(j.is_ok());
  int64_t v = -1;
  EXPECT_TRUE(read_int_in_range(*j, "a", 1, 3, &v, "t").is_ok());
  EXPECT_EQ(v, 3);
  EXPECT_TRUE(read_int_in_range(*j, "b", 1, 4, &v, "t").is_ok());
  EXPECT_EQ(v, 4);
  EXPECT_EQ(read_int_in_range(*j, "a", 4, 9, &v, "t").message(), "t: \"a\" must be an integer in [4, 9], got 3");
  EXPECT_FALSE(read_int_in_range(*j, "e", 0, 9, &v, "t").is_ok());
  EXPECT_FALSE(read_int_in_range(*j, "c", 0, 9, &v, "t").is_ok());
  EXPECT_TRUE(read_int_in_range(*j, "d", 0, 9, &v, "t").is_ok());  // null: optional, untouched
  EXPECT_EQ(v, 4);
  EXPECT_EQ(read_int_in_range(*j, "zz", 0, 9, &v, "t", Presence::kRequired).message(),
            "t: missing required key \"zz\"");
  double d = 0;
  EXPECT_TRUE(read_double_in_range(*j, "e", 0, 2, &d, "t").is_ok());
  EXPECT_EQ(d, 1.5);
  EXPECT_FALSE(read_double_in_range(*j, "e", 0, 1, &d, "t").is_ok());
  EXPECT_FALSE(read_positive_double(*j, "c", 1, &d, "t").is_ok());
  const Json* obj = nullptr;
  EXPECT_TRUE(read_object(*j, "f", &obj, "t").is_ok());
  ASSERT_NE(obj, nullptr);
  EXPECT_FALSE(read_object(*j, "h", &obj, "t").is_ok());
  std::vector<int64_t> ids;
  EXPECT_TRUE(read_id_list(*j, "h", 10, &ids, "t").is_ok());
  EXPECT_EQ(ids, (std::vector<int64_t>{1, 2}));
  EXPECT_FALSE(read_id_list(*j, "h", 1, &ids, "t").is_ok());
  bool b = false;
  EXPECT_TRUE(read_bool(*j, "i", &b, "t").is_ok());
  EXPECT_TRUE(b);
  EXPECT_FALSE(read_bool(*j, "a", &b, "t").is_ok());
  EXPECT_TRUE(require_int_range(5, "k", 0, 5, "t").is_ok());
  EXPECT_FALSE(require_int_range(6, "k", 0, 5, "t").is_ok());
}

TEST(GenerationConfigTest, Ranges) {
  auto j = parse_json(R"({"top_p":1.5})", "g");
  EXPECT_NE(parse_generation_config(*j).message().find("\"top_p\" must be a number in [0, 1]"), std::string::npos);
  auto j2 = parse_json(R"({"temperature":-1})", "g");
  EXPECT_FALSE(parse_generation_config(*j2).is_ok());
}

}  // namespace
}  // namespace rl
