// The Model interface and loading: a registry keyed by config.json's architectures[0] builds the model, whose
// weights are bound by their Hugging Face names and uploaded once to the backend.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "loader/model_config.h"
#include "model/forward_batch.h"
#include "parallel/communicator.h"
#include "parallel/sharding.h"

namespace rl {

// One rank of a tensor-parallel group (docs/distributed.md): which shard of every weight it loads
// (parallel/sharding.h) and the communicator its forward all-reduces and all-gathers through.
struct TensorParallel {
  parallel::TpPlan plan;
  parallel::ShardDims dims;
  parallel::Communicator* comm = nullptr;  // owned by the group (runtime/tp_model.h), outlives the model
};

// The sharding dimensions of a config, and the plan of `rank` of n: an error names the value n does not divide
// (heads, KV heads, intermediate size) or an architecture without tensor parallelism.
parallel::ShardDims tp_shard_dims(const ModelConfig& c);
Result<parallel::TpPlan> tp_plan_for(const ModelConfig& c, int32_t n, int32_t rank);

struct LoadOptions {
  DType weight_dtype = DType::kBF16;  // storage dtype of the weights on the backend
  // int8 matrices: every 2-D weight is quantised at load to int8 with per-row scales (core/quant.h, DType::kI8);
  // 1-D weights (norms, biases) keep weight_dtype. Needs a backend that supports kI8 (the CPU).
  bool quantize_int8 = false;
  bool dummy_weights = false;         // random weights at the config's shapes instead of safetensors
  uint64_t dummy_seed = 0x5eed;
  // Set: build this rank's shard only (architectures with Arch::tensor_parallel); null: the whole model.
  const TensorParallel* tp = nullptr;
};

class Model {
 public:
  virtual ~Model() = default;
  virtual const ModelConfig& config() const = 0;
  virtual Backend& backend() const = 0;
  // Bytes of weights as stored on the backend.
  virtual uint64_t weight_bytes() const = 0;
  // What the KV cache holds per layer (design.md §8): KV storage, the KV sizing and the cost model read it.
  virtual std::vector<KvLayerSpec> kv_spec() const = 0;
  // Backend bytes reserve(max_num_tokens, max_num_logits) allocates: the only estimate of the model's buffers.
  virtual uint64_t workspace_bytes(int64_t max_num_tokens, int64_t max_num_logits) const = 0;
  // Sizes the activation workspace once; forward() never allocates. Must be called before forward().
  virtual void reserve(int64_t max_num_tokens, int64_t max_num_logits) = 0;
  // Runs the decoder over the batch, writing this step's K/V into kv (one KvLayer per layer) and returning the
  // f32 logits [num_logits, vocab_size] in backend memory, valid until the next call.
  virtual Tensor forward(const ForwardBatch& batch, std::span<const KvLayer> kv) = 0;
  // > 0: a single-sequence decode step whose context (AttentionMetadata::max_seqlen_k) is at most this many keys
  // runs another kernel schedule (the Decoder's dense stack), so a runner keeps separate decode graphs for such
  // steps and gives them max_seqlen_k = this bound. 0: one schedule for every context.
  virtual int64_t short_decode_context() const { return 0; }
};

using ModelBuilder =
    std::function<Result<std::unique_ptr<Model>>(const ModelConfig&, const std::string& model_dir, Backend*,
                                                 const LoadOptions&)>;

// One architecture: its config parser (common fields + its own hyper-parameters, KV spec and parameter counts)
// and its builder. Each lives in src/model/arch/<arch>.cpp; registry.cpp maps architectures[0] to it.
struct Arch {
  Result<ModelConfig> (*parse)(const Json& config_json, const std::string& what);
  ModelBuilder build;
  bool tensor_parallel = false;  // its builder shards by LoadOptions::tp (the dense Llama-style decoders)
};

// Architectures with a builder (sorted).
std::vector<std::string> registered_architectures();
// config.json → ModelConfig through the architecture's own parser; an unknown architecture is an error that
// lists the supported ones.
Result<ModelConfig> parse_model_config(const Json& j, const std::string& what = "config.json");
Result<ModelConfig> load_model_config(const std::string& path);
// Loads config.json from model_dir, finds the builder for architectures[0] and builds the model.
Result<std::unique_ptr<Model>> load_model(const std::string& model_dir, Backend* backend, const LoadOptions& opts);
Result<std::unique_ptr<Model>> build_model(const ModelConfig& config, const std::string& model_dir,
                                           Backend* backend, const LoadOptions& opts);

}  // namespace rl
