#include "runtime/backend_factory.h"

#include "backend/cpu/cpu_backend.h"
#ifdef RIDGELINE_CUDA
#include "backend/cuda/cuda_backend.h"
#endif

namespace rl {

Result<std::unique_ptr<Backend>> create_backend(const std::string& device, const BackendOptions& opts) {
  if (device == "cpu") return std::unique_ptr<Backend>(std::make_unique<CpuBackend>(opts.num_threads));
  if (device == "cuda") {
#ifdef RIDGELINE_CUDA
    return create_cuda_backend(opts.device_index);
#else
    return Status::error("this build has no CUDA backend (build the cuda preset: cmake --preset cuda)");
#endif
  }
  return Status::error("unknown device \"" + device + "\" (expected cpu or cuda)");
}

}  // namespace rl
