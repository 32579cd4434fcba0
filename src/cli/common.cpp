#include "cli/common.h"

#include <cstdlib>

namespace rl::cli {

void add_model_dir_option(CLI::App* cmd, ModelOptions* opts) {
  cmd->add_option("-m,--model", opts->model_dir,
                  "Hugging Face model folder (config.json, *.safetensors, tokenizer.json); default: the embedded "
                  "default model");
}

std::string resolve_model_dir(const ModelOptions& opts) {
  if (!opts.model_dir.empty()) return opts.model_dir;
  if (const char* env = std::getenv("RIDGELINE_DEFAULT_MODEL")) return env;
  return RIDGELINE_DEFAULT_MODEL_DIR;
}

}  // namespace rl::cli
