// What the engine tests share: the device they run on (RIDGELINE_TEST_DEVICE: the CPU in ctest, cuda on the GPU
// machine) and the embedded default model with a small, fixed footprint.
#pragma once

#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "runtime/engine.h"

namespace rl::test_util {

inline std::string test_device() {
  const char* d = std::getenv("RIDGELINE_TEST_DEVICE");
  return d && *d ? d : "cpu";
}

// RIDGELINE_TINY_MODEL overrides the path on machines where the source folder sits elsewhere (the GPU machine).
inline std::string tiny_model_dir() {
  const char* d = std::getenv("RIDGELINE_TINY_MODEL");
  return d && *d ? d : std::string(RIDGELINE_SOURCE_DIR) + "/models/ridgeline-tiny";
}

// The default model on the test device: f32 weights (bf16 on CUDA), 2 CPU threads, a tenth of the GPU, and a KV
// pool of kv_bytes on either device.
inline EngineConfig tiny_engine_config(int64_t kv_bytes = 256ll << 20) {
  EngineConfig c;
  c.model_dir = tiny_model_dir();
  c.device = test_device();
  c.weight_dtype = DType::kF32;
  c.num_threads = 2;
  c.gpu_memory_utilization = 0.1;
  c.kv_cache_memory_bytes = kv_bytes;
  return c;
}

// A deterministic f32 engine over model_dir on the test device, no tokenizer, num_kv_blocks KV blocks of 16 and steps
// of at most 16 tokens, so that prompts of a few dozen tokens prefill in chunks mixed with other requests' decodes.
inline EngineConfig chunked_engine_config(const std::string& model_dir, int64_t num_kv_blocks, int32_t max_num_seqs) {
  EngineConfig c;
  c.model_dir = model_dir;
  c.device = test_device();
  c.deterministic = true;
  c.weight_dtype = DType::kF32;
  c.num_threads = 2;
  c.num_kv_blocks = num_kv_blocks;
  c.block_size = 16;
  c.max_num_seqs = max_num_seqs;
  c.max_num_batched_tokens = 16;
  c.load_tokenizer = false;
  return c;
}

// Greedy decoding of exactly max_tokens tokens (EOS ignored).
inline SamplingParams greedy(int32_t max_tokens) {
  SamplingParams p;
  p.temperature = 0;
  p.max_tokens = max_tokens;
  p.ignore_eos = true;
  return p;
}

// n prompts of min_len..max_len token ids drawn uniformly from [min_token, max_token], fixed by seed.
inline std::vector<std::vector<TokenId>> random_prompts(int n, int min_len, int max_len, uint64_t seed,
                                                        TokenId min_token = 10, TokenId max_token = 6000) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> len(min_len, max_len), tok(min_token, max_token);
  std::vector<std::vector<TokenId>> out;
  for (int i = 0; i < n; ++i) {
    std::vector<TokenId> p(static_cast<size_t>(len(rng)));
    for (auto& t : p) t = tok(rng);
    out.push_back(std::move(p));
  }
  return out;
}

}  // namespace rl::test_util
