// `ridgeline inspect`: what a model folder holds — architecture, sizes, parameter count (total and active per
// token for MoE), weight bytes, KV bytes per token and per layer (sliding windows), notes on how weights load.
#include <cstdio>

#include "backend/cpu/cpu_isa.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "loader/kv_groups.h"
#include "loader/model_config.h"
#include "model/model.h"

namespace rl::cli {

void add_inspect_command(CLI::App& app, int* exit_code) {
  auto* cmd = app.add_subcommand("inspect", "Show a model folder's architecture, sizes and memory needs");
  auto opts = std::make_shared<ModelOptions>();
  auto tp_size = std::make_shared<int32_t>(1);
  add_model_dir_option(cmd, opts.get());
  cmd->add_option("--tensor-parallel-size", *tp_size, "Also show what each of N ranks holds")->default_val(1);
  cmd->callback([opts, tp_size, exit_code] {
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
    const ParamCounts& pc = c.params;
    if (pc.num_moe_layers > 0) {
      std::printf("experts               %lld per MoE layer, top-%lld, %lld MoE layers\n",
                  static_cast<long long>(pc.num_experts), static_cast<long long>(pc.experts_per_tok),
                  static_cast<long long>(pc.num_moe_layers));
      const int64_t active = params - (pc.expert_params - pc.expert_params / pc.num_experts * pc.experts_per_tok);
      std::printf("active parameters     %lld (%.3f B) per token (matmul weights %lld)\n",
                  static_cast<long long>(active), active / 1e9, static_cast<long long>(pc.active_matmul));
    }
    // KV per layer, runs of equal layers folded: "0-11 full 8x64" / "window 128".
    for (size_t i = 0; i < c.kv_spec.size();) {
      size_t j = i;
      auto same = [&](const KvLayerSpec& a, const KvLayerSpec& b) {
        return a.kind == b.kind && a.num_kv_heads == b.num_kv_heads && a.head_dim == b.head_dim &&
               a.v_head_dim == b.v_head_dim && a.window == b.window && a.latent_dim == b.latent_dim;
      };
      bool alternating = c.kv_spec.size() > i + 2 && !same(c.kv_spec[i], c.kv_spec[i + 1]);
      if (alternating) {
        // Two kinds alternating (GPT-OSS): one line per kind.
        for (size_t k = i; k < i + 2; ++k) {
          const KvLayerSpec& s = c.kv_spec[k];
          int64_t count = 0;
          for (size_t m = k; m < c.kv_spec.size(); m += 2) count += same(c.kv_spec[m], s);
          std::printf("KV layers %zu,%zu,..   %lld layers, %s, %lld bytes/token (bf16)\n", k, k + 2,
                      static_cast<long long>(count),
                      s.kind == KvKind::kSliding ? ("window " + std::to_string(s.window)).c_str() : "full",
                      static_cast<long long>(s.elems_per_token() * 2));
        }
        break;
      }
      while (j < c.kv_spec.size() && same(c.kv_spec[i], c.kv_spec[j])) ++j;
      const KvLayerSpec& s = c.kv_spec[i];
      std::printf("KV layers %zu-%zu       %s, %lld bytes/token (bf16)\n", i, j - 1,
                  s.kind == KvKind::kSliding ? ("window " + std::to_string(s.window)).c_str()
                  : s.kind == KvKind::kLatent ? "latent"
                                              : "full",
                  static_cast<long long>(s.elems_per_token() * 2));
      i = j;
    }
    std::printf("KV bytes/seq @ 32k    %lld (bf16, windows applied)\n",
                static_cast<long long>(c.kv_bytes_at(32768, 2)));
    // The engine's cache: hybrid KV groups, each with its own block table (loader/kv_groups.h).
    const KvGroupPlan plan = plan_kv_groups(c.kv_spec, true, kMaxKvGroups);
    if (plan.num_groups() > 1) {
      std::printf("KV groups             %s\n", plan.describe().c_str());
      for (int32_t g = 0; g < plan.num_groups(); ++g) {
        int64_t elems = 0;
        for (size_t i = 0; i < c.kv_spec.size(); ++i) {
          if (plan.layer_group[i] == g) elems += c.kv_spec[i].elems_per_token();
        }
        std::printf("KV group %d            %lld bytes/token (bf16)\n", g, static_cast<long long>(elems * 2));
      }
      std::printf("KV cache bytes/token  %lld (bf16, long context: window groups keep only their windows; "
                  "all layers kept: %lld)\n",
                  static_cast<long long>(plan.elems_per_token() * 2), static_cast<long long>(c.kv_bytes_per_token(2)));
      std::printf("KV cache/seq @ 32k    %lld (bf16, blocks of 16, while decoding)\n",
                  static_cast<long long>(plan.elems_at(32768, 16, 1) * 2));
    }
    for (const std::string& n : c.notes) std::printf("note                  %s\n", n.c_str());
    if (*tp_size != 1) {  // issue 19: the shard of rank 0 (every rank holds the same amounts)
      auto plan = tp_plan_for(c, *tp_size, 0);
      if (!plan) {
        std::fprintf(stderr, "ridgeline: error: %s\n", plan.message().c_str());
        *exit_code = 1;
        return;
      }
      const parallel::TpPlan& p = *plan;
      std::printf("tensor parallel       %d ranks\n", *tp_size);
      std::printf("per rank heads        %lld / %lld (q / kv%s)\n", static_cast<long long>(p.num_heads),
                  static_cast<long long>(p.num_kv_heads),
                  p.kv_replicas > 1 ? (", each KV head on " + std::to_string(p.kv_replicas) + " ranks").c_str() : "");
      std::printf("per rank intermediate %lld\n", static_cast<long long>(p.intermediate));
      std::printf("per rank vocab rows   %lld (vocabulary padded to %lld)\n", static_cast<long long>(p.vocab_per_rank),
                  static_cast<long long>(p.padded_vocab));
      const int64_t norms = (2 * c.num_hidden_layers + 1) * c.hidden_size;
      const int64_t rank_params = (params - norms) / *tp_size + norms;
      std::printf("per rank weight bytes %lld (%.2f GB, bf16)\n", static_cast<long long>(rank_params * 2),
                  rank_params * 2 / 1e9);
      std::printf("per rank KV bytes/tok %lld (bf16)\n",
                  static_cast<long long>(c.kv_bytes_per_token(2) * p.num_kv_heads / c.num_kv_heads));
    }
    std::printf("cpu kernels           %s\n", cpu_isa_description().c_str());
  });
}

}  // namespace rl::cli
