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

namespace rl {

struct LoadOptions {
  DType weight_dtype = DType::kBF16;  // storage dtype of the weights on the backend
  // int8 matrices: every 2-D weight is quantised at load to int8 with per-row scales (core/quant.h, DType::kI8);
  // 1-D weights (norms, biases) keep weight_dtype. Needs a backend that supports kI8 (the CPU).
  bool quantize_int8 = false;
  bool dummy_weights = false;         // random weights at the config's shapes instead of safetensors
  uint64_t dummy_seed = 0x5eed;
};

class Model {
 public:
  virtual ~Model() = default;
  virtual const ModelConfig& config() const = 0;
  virtual Backend& backend() const = 0;
  // Bytes of weights as stored on the backend.
  virtual uint64_t weight_bytes() const = 0;
  // Sizes the activation workspace once; forward() never allocates. Must be called before forward().
  virtual void reserve(int64_t max_num_tokens, int64_t max_num_logits) = 0;
  // Runs the decoder over the batch, writing this step's K/V into kv (one KvLayer per layer) and returning the
  // f32 logits [num_logits, vocab_size] in backend memory, valid until the next call.
  virtual Tensor forward(const ForwardBatch& batch, std::span<const KvLayer> kv) = 0;
};

using ModelBuilder =
    std::function<Result<std::unique_ptr<Model>>(const ModelConfig&, const std::string& model_dir, Backend*,
                                                 const LoadOptions&)>;

// Architectures with a builder (sorted).
std::vector<std::string> registered_architectures();
// Loads config.json from model_dir, finds the builder for architectures[0] and builds the model.
Result<std::unique_ptr<Model>> load_model(const std::string& model_dir, Backend* backend, const LoadOptions& opts);
Result<std::unique_ptr<Model>> build_model(const ModelConfig& config, const std::string& model_dir,
                                           Backend* backend, const LoadOptions& opts);

}  // namespace rl
