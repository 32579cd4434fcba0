#include "core/tensor.h"

#include <cstdlib>
#include <new>

namespace rl {

std::string Tensor::shape_str() const {
  std::string s = "[";
  for (int i = 0; i < ndim; ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

void HostBuffer::Free::operator()(void* p) const { std::free(p); }

HostBuffer::HostBuffer(size_t nbytes) { resize(nbytes); }

void HostBuffer::resize(size_t nbytes) {
  ptr_.reset();
  size_ = 0;
  if (nbytes == 0) return;
  size_t rounded = (nbytes + 63) / 64 * 64;
  void* p = std::aligned_alloc(64, rounded);
  if (!p) throw std::bad_alloc();
  ptr_.reset(p);
  size_ = nbytes;
}

}  // namespace rl
