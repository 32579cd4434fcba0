// `ridgeline inspect`: what a model folder holds — architecture, sizes, parameter count, weight bytes, KV bytes
// per token.
#include <cstdio>

#include "backend/cpu/cpu_isa.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "loader/model_config.h"

namespace rl::cli {

void add_inspect_command(CLI::App& app, int* exit_code) {
  auto* cmd = app.add_subcommand("inspect", "Show a model folder's architecture, sizes and memory needs");
  auto opts = std::make_shared<ModelOptions>();
  add_model_dir_option(cmd, opts.get());
  cmd->callback([opts, exit_code] {
    auto config = load_model_config(path_join(resolve_model_dir(*opts), "config.json"));
    if (!config) {
      std::fprintf(stderr, "ridgeline: error: %s\n", config.message().c_str());
      *exit_code = 1;
      return;
    }
    const ModelConfig& c = *config;
    int64_t params = c.num_params();
    std::printf("architecture          %s\n", c.architecture.c_str());
    std::printf("layers                %lld\n", static_cast<long long>(c.num_hidden_layers));
    std::printf("hidden_size           %lld\n", static_cast<long long>(c.hidden_size));
    std::printf("intermediate_size     %lld\n", static_cast<long long>(c.intermediate_size));
    std::printf("heads (q / kv)        %lld / %lld\n", static_cast<long long>(c.num_attention_heads),
                static_cast<long long>(c.num_kv_heads));
    std::printf("head_dim              %lld\n", static_cast<long long>(c.head_dim));
    std::printf("vocab_size            %lld\n", static_cast<long long>(c.vocab_size));
    std::printf("max context           %lld\n", static_cast<long long>(c.max_context_len()));
    std::printf("tied embeddings       %s\n", c.tie_word_embeddings ? "yes" : "no");
    std::printf("parameters            %lld (%.3f B)\n", static_cast<long long>(params), params / 1e9);
    std::printf("weight bytes (bf16)   %lld (%.2f GB)\n", static_cast<long long>(params * 2), params * 2 / 1e9);
    std::printf("weight bytes (f32)    %lld (%.2f GB)\n", static_cast<long long>(params * 4), params * 4 / 1e9);
    std::printf("KV bytes/token (bf16) %lld\n", static_cast<long long>(c.kv_bytes_per_token(2)));
    std::printf("KV bytes/token (f32)  %lld\n", static_cast<long long>(c.kv_bytes_per_token(4)));
    std::printf("cpu kernels           %s\n", cpu_isa_description().c_str());
  });
}

}  // namespace rl::cli
