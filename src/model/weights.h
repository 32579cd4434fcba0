// Binding weights by their Hugging Face names: each tensor is checked against the shape the architecture
// expects, converted to the storage dtype and uploaded to the backend once. With dummy weights, tensors are
// filled on the backend with seeded uniform values instead.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "core/log.h"
#include "loader/safetensors.h"
#include "model/model.h"

namespace rl {

class WeightLoader {
 public:
  // Opens the folder's safetensors (unless opts.dummy_weights). total_bytes drives the progress bar.
  static Result<std::unique_ptr<WeightLoader>> create(const std::string& model_dir, Backend* backend,
                                                      const LoadOptions& opts, uint64_t total_bytes);

  bool has(const std::string& name) const;
  // Loads the named tensors (concatenated along dim 0 when several, e.g. q/k/v → qkv), each with the shape
  // given in `shapes`, into one backend tensor of the storage dtype. Dummy: uniform in [-scale, scale] (or
  // `fill` exactly when set, for norm weights).
  Result<Tensor> load(const std::vector<std::string>& names, const std::vector<std::vector<int64_t>>& shapes,
                      float dummy_scale, std::optional<float> dummy_fill = std::nullopt);
  // Tensor parallelism: load() of this rank's slice of each named tensor, by its role's sharding rule
  // (parallel/sharding.h), concatenated along rows; vocab-parallel padding rows are zeros. Without a plan
  // (LoadOptions::tp null) it is load(). Dummy weights take the slice of the values load() gives the whole
  // tensor, so a TP=N model with dummy weights is the TP=1 model split.
  Result<Tensor> load_sharded(const std::vector<std::string>& names, const std::vector<std::vector<int64_t>>& shapes,
                              const std::vector<parallel::WeightRole>& roles, float dummy_scale);
  // The rank's plan (null: one rank).
  const parallel::TpPlan* tp() const { return opts_.tp ? &opts_.tp->plan : nullptr; }
  int32_t tp_rank() const { return opts_.tp ? opts_.tp->plan.rank : 0; }
  // load() that keeps weight_dtype even under LoadOptions::quantize_int8: for 2-D tensors that no linear op
  // multiplies whole (stacked expert weights sliced per expert, per-expert bias rows, position tables).
  Result<Tensor> load_unquantized(const std::vector<std::string>& names,
                                  const std::vector<std::vector<int64_t>>& shapes, float dummy_scale);
  // A tensor computed on the host from the checkpoint (transposed Conv1D weights, de-interleaved or dequantised
  // experts): fill(dst) writes `shape`'s elements in f32; the result is converted to the storage dtype and
  // uploaded. Dummy weights skip fill and draw uniform values (or `dummy_fill`) instead.
  Result<Tensor> load_computed(const std::vector<int64_t>& shape, float dummy_scale,
                               const std::function<Status(float* dst)>& fill,
                               std::optional<float> dummy_fill = std::nullopt);
  // The checkpoint's tensor (null when absent or with dummy weights), and its values in f32 after a shape check.
  const TensorInfo* find(const std::string& name) const { return store_ ? store_->find(name) : nullptr; }
  Result<std::vector<float>> read_f32(const std::string& name, const std::vector<int64_t>& shape) const;
  bool dummy() const { return !store_; }
  void finish();

  // Every allocation made by load(); the model keeps them alive.
  std::vector<DeviceBuffer> take_buffers() { return std::move(buffers_); }
  uint64_t bytes_loaded() const { return bytes_loaded_; }

 private:
  Result<Tensor> load_impl(const std::vector<std::string>& names, const std::vector<std::vector<int64_t>>& shapes,
                           float dummy_scale, std::optional<float> dummy_fill, bool allow_int8);
  // load() for a 2-D weight under LoadOptions::quantize_int8: rows quantised on the host, uploaded once.
  Result<Tensor> load_int8(const std::vector<std::string>& names, const std::vector<std::vector<int64_t>>& shapes,
                           float dummy_scale, int64_t rows, int64_t cols);

  Backend* backend_ = nullptr;
  LoadOptions opts_;
  std::optional<WeightStore> store_;
  std::vector<DeviceBuffer> buffers_;
  std::unique_ptr<ProgressBar> progress_;
  uint64_t bytes_loaded_ = 0;
  uint64_t counter_ = 0;
};

}  // namespace rl
