// MistralForCausalLM: the dense Llama-style decoder without biases; an active sliding_window caps the context.
#include "model/arch/archs.h"
#include "model/arch/dense.h"

namespace rl {

const Arch kMistralArch = {
    [](const Json& j, const std::string& what) { return parse_dense(j, what, DenseFlavor::kMistral); }, build_dense,
    /*tensor_parallel=*/true};

}  // namespace rl
