// Non-owning tensor view (contiguous, row-major) and an owning host buffer. Backends interpret `data` as host
// or device memory according to where they allocated it; a view never frees anything.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>

#include "core/check.h"
#include "core/dtype.h"

namespace rl {

constexpr int kMaxDims = 4;

struct Tensor {
  void* data = nullptr;
  DType dtype = DType::kF32;
  int ndim = 0;
  std::array<int64_t, kMaxDims> shape{};

  Tensor() = default;
  Tensor(void* d, DType dt, std::initializer_list<int64_t> dims) : data(d), dtype(dt) {
    RL_CHECK(dims.size() <= kMaxDims);
    for (int64_t x : dims) shape[ndim++] = x;
  }

  int64_t numel() const {
    int64_t n = 1;
    for (int i = 0; i < ndim; ++i) n *= shape[i];
    return n;
  }
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype); }
  int64_t dim(int i) const { return shape[i < 0 ? ndim + i : i]; }
  // Number of rows when viewed as 2-D [rows, last_dim].
  int64_t rows() const { return ndim == 0 ? 1 : numel() / shape[ndim - 1]; }

  template <typename T>
  T* as() const { return static_cast<T*>(data); }
  float* f32() const { RL_CHECK(dtype == DType::kF32); return static_cast<float*>(data); }
  int32_t* i32() const { RL_CHECK(dtype == DType::kI32); return static_cast<int32_t*>(data); }

  // The view of rows [begin, begin + count) of the first dimension.
  Tensor slice_rows(int64_t begin, int64_t count) const {
    Tensor t = *this;
    int64_t row = numel() / shape[0];
    t.data = static_cast<char*>(data) + static_cast<size_t>(begin * row) * dtype_size(dtype);
    t.shape[0] = count;
    return t;
  }
  Tensor reshaped(std::initializer_list<int64_t> dims) const {
    Tensor t(data, dtype, dims);
    RL_CHECK(t.numel() == numel());
    return t;
  }
  std::string shape_str() const;
};

// 64-byte aligned host allocation.
class HostBuffer {
 public:
  HostBuffer() = default;
  explicit HostBuffer(size_t nbytes);
  void* data() const { return ptr_.get(); }
  size_t size() const { return size_; }
  void resize(size_t nbytes);  // discards contents

 private:
  struct Free { void operator()(void* p) const; };
  std::unique_ptr<void, Free> ptr_;
  size_t size_ = 0;
};

}  // namespace rl
