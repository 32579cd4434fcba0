// Qwen2ForCausalLM: the dense Llama-style decoder with q/k/v biases (always) and no o_proj bias.
#include "model/arch/archs.h"
#include "model/arch/dense.h"

namespace rl {

const Arch kQwen2Arch = {
    [](const Json& j, const std::string& what) { return parse_dense(j, what, DenseFlavor::kQwen2); }, build_dense,
    /*tensor_parallel=*/true};

}  // namespace rl
