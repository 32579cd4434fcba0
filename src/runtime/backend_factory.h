// Creates a backend by device name. CUDA exists only in builds with RIDGELINE_CUDA.
#pragma once

#include <memory>
#include <string>

#include "backend/backend.h"

namespace rl {

struct BackendOptions {
  int num_threads = 0;   // CPU: 0 = all cores
  int device_index = 0;  // CUDA
};

// "cpu" or "cuda"; an error names what is unavailable.
Result<std::unique_ptr<Backend>> create_backend(const std::string& device, const BackendOptions& opts);

}  // namespace rl
