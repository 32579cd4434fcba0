// The dense stack (Backend::dense_stack_decode: a batch-1 decode step's layers as one persistent kernel) against
// the layer-by-layer kernels, on models of real widths with random weights: Qwen3 (q/k norm, 8 KV heads),
// Llama 3 (no q/k norm, llama3 RoPE scaling, 4 query heads per KV head, an MLP width that is not a multiple of the
// kernel's 1024-column chunk), Qwen2 (qkv bias, head_dim 64, 7 query heads per KV head, widths of 896 and 4864)
// and a head_dim-256 Qwen3. Each decodes after a 5-token prompt (one key split) and a 300-token prompt (many
// splits, merged across blocks): the logits of every step must match the unfused path's within bf16 rounding, and
// two runs of the stack must give the same bits. After a 2100-token prompt (past the stack's context bound) the
// layer kernels run: the same bits as the reference. Greedy decoding through CUDA graphs gives the eager ids, short
// (the stack) and long (the layer kernels). Every case runs over a bf16 KV cache and over an FP8 e4m3 one (the
// stack's fp8 instances; at head_dim 256, which has none, every step runs the layer kernels).
// Named test_model_*: built into rl_tests_ops only (it needs rl_runtime).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <tuple>

#include "backend/cuda/cuda_backend.h"
#include "model/layers/decoder.h"
#include "model/model.h"
#include "runtime/kv_storage.h"
#include "runtime/model_runner.h"
#include "runtime/sampler.h"
#include "sched/sampling_params.h"

namespace rl {
namespace {

CudaBackend& backend(bool stack) {
  static std::unique_ptr<Backend> on, off;
  std::unique_ptr<Backend>& be = stack ? on : off;
  if (!be) {
    auto b = create_cuda_backend(0);
    RL_CHECK_MSG(b.is_ok(), "%s", b.message().c_str());
    be = std::move(b).value();
    static_cast<CudaBackend*>(be.get())->set_dense_stack(stack);
  }
  return *static_cast<CudaBackend*>(be.get());
}

struct StackCase {
  const char* name;
  const char* config;  // config.json
};

constexpr int64_t kBlockSize = 16, kNumBlocks = 160;

struct StackRun {
  std::unique_ptr<Model> model;
  std::unique_ptr<KvStorage> kv;
  std::unique_ptr<ModelRunner> runner;
  std::unique_ptr<Sampler> sampler;

  StackRun(const std::string& dir, bool stack, bool enforce_eager, DType kv_dtype) {
    LoadOptions opts;
    opts.weight_dtype = DType::kBF16;
    opts.dummy_weights = true;
    auto m = load_model(dir, &backend(stack), opts);
    RL_CHECK_MSG(m.is_ok(), "%s", m.message().c_str());
    model = std::move(m).value();
    kv = std::make_unique<KvStorage>(&backend(stack), model->config(), kNumBlocks, kBlockSize, kv_dtype, nullptr);
    RunnerLimits lim;
    lim.max_num_tokens = 1024;  // the long graph check's prompt (short bound + 40) is one step
    lim.max_num_seqs = 4;
    lim.max_model_len = kNumBlocks * kBlockSize;
    lim.enforce_eager = enforce_eager;
    runner = std::make_unique<ModelRunner>(model.get(), kv.get(), lim);
    sampler = std::make_unique<Sampler>(&backend(stack), lim.max_num_seqs, model->config().vocab_size,
                                        lim.max_num_seqs);
  }
  const std::string& note() const { return dynamic_cast<const Decoder&>(*model).dense_stack_note(); }
  int64_t vocab() const { return model->config().vocab_size; }

  // Prefill `prompt`, then one decode step per token of `feed`; the logits of each decode step.
  std::vector<std::vector<float>> decode(const std::vector<int32_t>& prompt, const std::vector<int32_t>& feed,
                                         const std::vector<int32_t>& table) {
    std::vector<int32_t> seq = prompt;
    std::vector<std::vector<float>> out;
    std::vector<float> logits;
    SeqStep s;
    s.block_table = table.data();
    s.num_blocks = static_cast<int64_t>(table.size());
    for (int64_t done = 0; done < static_cast<int64_t>(seq.size()); done += s.num_new_tokens) {  // chunked prefill
      s.token_ids = seq.data() + done;
      s.num_computed = done;
      s.num_new_tokens = std::min<int64_t>(512, static_cast<int64_t>(seq.size()) - done);
      runner->step({s}, &logits);
    }
    for (int32_t tok : feed) {
      seq.push_back(tok);
      s.token_ids = seq.data() + seq.size() - 1;
      s.num_computed = static_cast<int64_t>(seq.size()) - 1;
      s.num_new_tokens = 1;
      runner->step({s}, &logits);
      out.push_back(logits);
    }
    return out;
  }

  // Greedy decoding through launch() (CUDA graphs unless eager): the ids of num_new steps after the prompt.
  std::vector<int32_t> greedy(const std::vector<int32_t>& prompt, int64_t num_new, const std::vector<int32_t>& table) {
    std::vector<int32_t> seq = prompt, out;
    SamplingParams params;
    params.temperature = 0.0f;
    int64_t computed = 0;
    int parity = 0;
    for (int64_t i = 0; i < num_new; ++i) {
      SeqStep s;
      s.token_ids = seq.data() + computed;
      s.num_new_tokens = static_cast<int64_t>(seq.size()) - computed;
      s.num_computed = computed;
      s.block_table = table.data();
      s.num_blocks = static_cast<int64_t>(table.size());
      SamplerRow row;
      row.params = &params;
      row.prompt_token_ids = prompt;
      row.num_outputs = static_cast<int64_t>(out.size());
      std::vector<SamplerRow> rows = {row};
      runner->launch({s}, rows, sampler.get(), parity);
      Backend& be = model->backend();
      be.wait_fence(be.record_fence());
      const int32_t next = sampler->result(parity, 0).token;
      computed = static_cast<int64_t>(seq.size());
      seq.push_back(next);
      out.push_back(next);
      parity ^= 1;
    }
    return out;
  }
};

std::vector<int32_t> tokens(int64_t n, int64_t vocab, uint32_t seed) {
  std::vector<int32_t> t;
  uint32_t x = seed;
  for (int64_t i = 0; i < n; ++i) {
    x = x * 1664525u + 1013904223u;
    t.push_back(static_cast<int32_t>((x >> 8) % static_cast<uint32_t>(vocab)));
  }
  return t;
}

// Block ids in a scattered order (the kernel reads pages through the table).
std::vector<int32_t> table(int64_t blocks, int32_t offset) {
  std::vector<int32_t> t;
  for (int64_t i = 0; i < blocks; ++i) t.push_back(static_cast<int32_t>((i * 37 + offset) % kNumBlocks));
  return t;
}

double rel_rms(const std::vector<float>& a, const std::vector<float>& ref) {
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    num += (static_cast<double>(a[i]) - ref[i]) * (static_cast<double>(a[i]) - ref[i]);
    den += static_cast<double>(ref[i]) * ref[i];
  }
  return std::sqrt(num / std::max(den, 1e-30));
}

int32_t argmax(const std::vector<float>& v) {
  return static_cast<int32_t>(std::max_element(v.begin(), v.end()) - v.begin());
}

class CudaDenseStack : public ::testing::TestWithParam<std::tuple<StackCase, bool>> {};

TEST_P(CudaDenseStack, MatchesTheLayerKernelsAndIsDeterministic) {
  const StackCase& c = std::get<0>(GetParam());
  const bool fp8 = std::get<1>(GetParam());
  const DType kv_dt = fp8 ? DType::kFP8E4M3 : DType::kBF16;
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / (std::string("rl_stack_") + c.name + (fp8 ? "_fp8" : ""));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "config.json") << c.config;

  StackRun on(dir.string(), true, true, kv_dt), off(dir.string(), false, true, kv_dt);
  ASSERT_EQ(on.note(), "") << "the stack must serve this shape";
  ASSERT_NE(off.note(), "");
  // No fp8 instance at head_dim 256: there the layer kernels run every step, with the reference's bits.
  const bool has_stack = !(fp8 && std::string(c.name) == "qwen3_hd256");
  const int64_t v = on.vocab();
  for (int64_t prompt_len : {5, 300, 2100}) {
    SCOPED_TRACE("prompt " + std::to_string(prompt_len));
    const std::vector<int32_t> prompt = tokens(prompt_len, v, static_cast<uint32_t>(prompt_len));
    const std::vector<int32_t> feed = tokens(10, v, 7u);
    const int64_t blocks = (prompt_len + 10 + kBlockSize - 1) / kBlockSize;
    const auto ref = off.decode(prompt, feed, table(blocks, 3));
    const int64_t launches = backend(true).dense_stack_launches();
    const auto got = on.decode(prompt, feed, table(blocks, 11));
    // Steps past the backend's context bound run the layer kernels: the same bits as the reference.
    const bool stacked =
        has_stack && prompt_len + static_cast<int64_t>(feed.size()) <= on.model->short_decode_context();
    EXPECT_EQ(backend(true).dense_stack_launches() - launches, stacked ? static_cast<int64_t>(feed.size()) : 0)
        << "every short decode step runs the stack, no long one";
    if (!stacked) {
      EXPECT_EQ(got, ref);
    }
    EXPECT_EQ(backend(false).dense_stack_launches(), 0);
    const auto again = on.decode(prompt, feed, table(blocks, 50));
    ASSERT_EQ(got.size(), feed.size());
    for (size_t i = 0; i < feed.size(); ++i) {
      ASSERT_EQ(got[i].size(), static_cast<size_t>(v));
      const double e = rel_rms(got[i], ref[i]);
      EXPECT_LT(e, 2e-2) << "decode step " << i;
      EXPECT_EQ(got[i], again[i]) << "decode step " << i << ": two runs of the stack differ";
      std::vector<float> sorted = ref[i];
      std::nth_element(sorted.begin(), sorted.begin() + 1, sorted.end(), std::greater<float>());
      if (sorted[0] - sorted[1] > 0.05f * (std::fabs(sorted[0]) + 1e-3f)) {
        EXPECT_EQ(argmax(got[i]), argmax(ref[i])) << "decode step " << i;
      }
    }
  }
  // The engine's path: one CUDA graph per decode step, sampling included.
  StackRun graphs(dir.string(), true, false, kv_dt);
  const std::vector<int32_t> prompt = tokens(40, v, 99u);
  const std::vector<int32_t> t = table(4, 5);
  const int64_t graph_launches = backend(true).dense_stack_launches();
  EXPECT_EQ(graphs.greedy(prompt, 12, t), on.greedy(prompt, 12, t));
  EXPECT_GT(graphs.runner->num_graph_steps(), 0);
  EXPECT_EQ(backend(true).dense_stack_launches() > graph_launches, has_stack) << "the short steps ran the stack";
  // Past the bound: the long decode graphs, the layer kernels.
  const std::vector<int32_t> long_prompt = tokens(on.model->short_decode_context() + 40, v, 5u);
  const std::vector<int32_t> long_table = table((static_cast<int64_t>(long_prompt.size()) + 8 + 15) / 16, 9);
  const int64_t before = backend(true).dense_stack_launches();
  EXPECT_EQ(graphs.greedy(long_prompt, 6, long_table), off.greedy(long_prompt, 6, long_table));
  EXPECT_EQ(backend(true).dense_stack_launches(), before);
  std::filesystem::remove_all(dir);
}

const StackCase kCases[] = {
    {"qwen3", R"({"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": 1024,
      "num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 128, "intermediate_size": 3072,
      "num_hidden_layers": 3, "vocab_size": 2048, "rms_norm_eps": 1e-06, "rope_theta": 1000000,
      "max_position_embeddings": 4096, "tie_word_embeddings": true, "hidden_act": "silu"})"},
    {"llama3", R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 2048,
      "num_attention_heads": 16, "num_key_value_heads": 4, "head_dim": 128, "intermediate_size": 5632,
      "num_hidden_layers": 2, "vocab_size": 1000, "rms_norm_eps": 1e-05, "rope_theta": 500000,
      "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                       "original_max_position_embeddings": 8192, "rope_type": "llama3"},
      "max_position_embeddings": 131072, "tie_word_embeddings": false, "hidden_act": "silu"})"},
    {"qwen2_bias", R"({"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 896,
      "num_attention_heads": 14, "num_key_value_heads": 2, "intermediate_size": 4864,
      "num_hidden_layers": 2, "vocab_size": 1500, "rms_norm_eps": 1e-06, "rope_theta": 1000000,
      "max_position_embeddings": 32768, "tie_word_embeddings": true, "hidden_act": "silu"})"},
    {"qwen3_hd256", R"({"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": 1024,
      "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 256, "intermediate_size": 1536,
      "num_hidden_layers": 2, "vocab_size": 1200, "rms_norm_eps": 1e-06, "rope_theta": 1000000,
      "max_position_embeddings": 4096, "tie_word_embeddings": true, "hidden_act": "silu"})"},
    // The two remaining kernel instantiations (decode_stack.cu, kernel_for): head_dim 128 with 8 query heads per KV
    // head, head_dim 64 with 4.
    {"llama_gqa8", R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 2048,
      "num_attention_heads": 16, "num_key_value_heads": 2, "intermediate_size": 4096,
      "num_hidden_layers": 2, "vocab_size": 1100, "rms_norm_eps": 1e-05, "rope_theta": 500000,
      "max_position_embeddings": 8192, "tie_word_embeddings": false, "hidden_act": "silu"})"},
    {"qwen2_hd64_gqa4", R"({"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 512,
      "num_attention_heads": 8, "num_key_value_heads": 2, "intermediate_size": 1408,
      "num_hidden_layers": 2, "vocab_size": 900, "rms_norm_eps": 1e-06, "rope_theta": 1000000,
      "max_position_embeddings": 32768, "tie_word_embeddings": true, "hidden_act": "silu"})"},
};

INSTANTIATE_TEST_SUITE_P(Shapes, CudaDenseStack, ::testing::Combine(::testing::ValuesIn(kCases), ::testing::Bool()),
                         [](const ::testing::TestParamInfo<std::tuple<StackCase, bool>>& i) {
                           return std::string(std::get<0>(i.param).name) + (std::get<1>(i.param) ? "_fp8" : "");
                         });

}  // namespace
}  // namespace rl
