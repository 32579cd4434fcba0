// Options shared by the commands that load a model, and the default-model lookup.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

#include "core/file.h"

namespace rl::cli {

struct ModelOptions {
  std::string model_dir;  // empty: the embedded default model
};

// Adds -m/--model.
void add_model_dir_option(CLI::App* cmd, ModelOptions* opts);
// The folder to load: -m if given, else the embedded default model (found next to the binary's source tree or
// through RIDGELINE_DEFAULT_MODEL).
std::string resolve_model_dir(const ModelOptions& opts);

}  // namespace rl::cli
