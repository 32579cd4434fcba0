#include <algorithm>
#include <map>

#include "core/file.h"
#include "model/arch/archs.h"
#include "model/model.h"

namespace rl {

namespace {

// architectures[0] → architecture. Adding an architecture: its arch file and one line here.
const std::map<std::string, const Arch*>& registry() {
  static const std::map<std::string, const Arch*> kRegistry = {
      {"DeepseekV2ForCausalLM", &kDeepseekV2Arch},
      {"DeepseekV3ForCausalLM", &kDeepseekV3Arch},
      {"GPT2LMHeadModel", &kGpt2Arch},
      {"GptOssForCausalLM", &kGptOssArch},
      {"LlamaForCausalLM", &kLlamaArch},
      {"MistralForCausalLM", &kMistralArch},
      {"Qwen2ForCausalLM", &kQwen2Arch},
      {"Qwen3ForCausalLM", &kQwen3Arch},
      {"Qwen3MoeForCausalLM", &kQwen3MoeArch},
  };
  return kRegistry;
}

std::string supported_list() {
  std::string list;
  for (const auto& a : registered_architectures()) list += (list.empty() ? "" : ", ") + a;
  return list;
}

}  // namespace

std::vector<std::string> registered_architectures() {
  std::vector<std::string> out;
  for (const auto& [name, a] : registry()) out.push_back(name);
  return out;
}

Result<ModelConfig> parse_model_config(const Json& j, const std::string& what) {
  if (!j.is_object()) return Status::error(what + ": must be a JSON object");
  auto arch = j.find("architectures");
  if (arch == j.end() || !arch->is_array() || arch->empty() || !(*arch)[0].is_string()) {
    return Status::error(what + ": \"architectures\" must be a non-empty list of strings");
  }
  const std::string name = (*arch)[0].get<std::string>();
  auto it = registry().find(name);
  if (it == registry().end()) {
    return Status::error(what + ": architecture \"" + name + "\" is not supported (supported: " + supported_list() +
                         ")");
  }
  return it->second->parse(j, what);
}

Result<ModelConfig> load_model_config(const std::string& path) {
  RL_ASSIGN_OR_RETURN(Json j, load_json_file(path));
  return parse_model_config(j, path);
}

parallel::ShardDims tp_shard_dims(const ModelConfig& c) {
  parallel::ShardDims d;
  d.hidden_size = c.hidden_size;
  d.num_heads = c.num_attention_heads;
  d.num_kv_heads = c.num_kv_heads;
  d.head_dim = c.head_dim;
  d.intermediate_size = c.intermediate_size;
  d.vocab_size = c.vocab_size;
  return d;
}

Result<parallel::TpPlan> tp_plan_for(const ModelConfig& c, int32_t n, int32_t rank) {
  if (n > 1) {
    auto it = registry().find(c.architecture);
    if (it == registry().end() || !it->second->tensor_parallel) {
      std::string list;
      for (const auto& [name, a] : registry()) {
        if (a->tensor_parallel) list += (list.empty() ? "" : ", ") + name;
      }
      return Status::error("--tensor-parallel-size " + std::to_string(n) + ": architecture " + c.architecture +
                           " runs on one rank only (tensor parallelism: " + list + ")");
    }
  }
  return parallel::make_tp_plan(tp_shard_dims(c), n, rank);
}

Result<std::unique_ptr<Model>> build_model(const ModelConfig& config, const std::string& model_dir,
                                           Backend* backend, const LoadOptions& opts) {
  auto it = registry().find(config.architecture);
  if (it == registry().end()) {
    return Status::error("architecture \"" + config.architecture + "\" has no model (supported: " +
                         supported_list() + ")");
  }
  if (opts.tp && opts.tp->plan.tp_size > 1 && !it->second->tensor_parallel) {
    return Status::error("architecture " + config.architecture + " has no tensor-parallel loader");
  }
  return it->second->build(config, model_dir, backend, opts);
}

Result<std::unique_ptr<Model>> load_model(const std::string& model_dir, Backend* backend, const LoadOptions& opts) {
  RL_ASSIGN_OR_RETURN(ModelConfig config, load_model_config(path_join(model_dir, "config.json")));
  return build_model(config, model_dir, backend, opts);
}

}  // namespace rl
