// safetensors reading: mmap'd files, validated completely before any tensor data is touched.
// Format: u64 little-endian header length N, N bytes of JSON {name: {dtype, shape, data_offsets: [b, e]}, ...,
// "__metadata__": {...}}, then the data region; offsets are relative to the data region.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/file.h"
#include "core/status.h"

namespace rl {

// Largest header we accept (the reference implementation's limit).
constexpr uint64_t kMaxSafetensorsHeader = 100ull * 1000 * 1000;

struct TensorInfo {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  const unsigned char* data = nullptr;  // inside the mapping, valid while the owning file lives
  size_t nbytes = 0;
  std::string file;  // path of the file holding it (for errors)

  int64_t numel() const;
  std::string shape_str() const;
};

class SafetensorsFile {
 public:
  static Result<std::unique_ptr<SafetensorsFile>> open(const std::string& path);
  const std::map<std::string, TensorInfo>& tensors() const { return tensors_; }
  const std::string& path() const { return file_.path(); }

 private:
  MappedFile file_;
  std::map<std::string, TensorInfo> tensors_;
};

// All tensors of a model folder: model.safetensors, or the shards listed in model.safetensors.index.json.
class WeightStore {
 public:
  static Result<WeightStore> open(const std::string& model_dir);
  // True when the folder holds safetensors weights at all (single file or index).
  static bool has_weights(const std::string& model_dir);

  const TensorInfo* find(const std::string& name) const;
  std::vector<std::string> names() const;
  uint64_t total_bytes() const;

 private:
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, const TensorInfo*> index_;
};

}  // namespace rl
