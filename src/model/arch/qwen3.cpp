// Qwen3ForCausalLM: the dense Llama-style decoder with per-head q/k RMSNorm before RoPE.
#include "model/arch/archs.h"
#include "model/arch/dense.h"

namespace rl {

const Arch kQwen3Arch = {
    [](const Json& j, const std::string& what) { return parse_dense(j, what, DenseFlavor::kQwen3); }, build_dense,
    /*tensor_parallel=*/true};

}  // namespace rl
