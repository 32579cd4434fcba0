#include <algorithm>
#include <map>

#include "core/file.h"
#include "model/arch/dense_decoder.h"
#include "model/model.h"

namespace rl {

namespace {

// architectures[0] → builder. Adding an architecture: its arch file and one line here.
const std::map<std::string, ModelBuilder>& registry() {
  static const std::map<std::string, ModelBuilder> kRegistry = {
      {"LlamaForCausalLM", build_dense_decoder},
      {"MistralForCausalLM", build_dense_decoder},
      {"Qwen2ForCausalLM", build_dense_decoder},
      {"Qwen3ForCausalLM", build_dense_decoder},
  };
  return kRegistry;
}

}  // namespace

std::vector<std::string> registered_architectures() {
  std::vector<std::string> out;
  for (const auto& [name, b] : registry()) out.push_back(name);
  return out;
}

Result<std::unique_ptr<Model>> build_model(const ModelConfig& config, const std::string& model_dir,
                                           Backend* backend, const LoadOptions& opts) {
  auto it = registry().find(config.architecture);
  if (it == registry().end()) {
    std::string list;
    for (const auto& a : registered_architectures()) list += (list.empty() ? "" : ", ") + a;
    return Status::error("architecture \"" + config.architecture + "\" has no model (supported: " + list + ")");
  }
  return it->second(config, model_dir, backend, opts);
}

Result<std::unique_ptr<Model>> load_model(const std::string& model_dir, Backend* backend, const LoadOptions& opts) {
  RL_ASSIGN_OR_RETURN(ModelConfig config, load_model_config(path_join(model_dir, "config.json")));
  return build_model(config, model_dir, backend, opts);
}

}  // namespace rl
