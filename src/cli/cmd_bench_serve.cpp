// `ridgeline bench serve`: load against a running server (server/serve_bench.h), printed in vLLM's layout and
// optionally saved as JSON with vLLM's keys.
#include <cmath>
#include <cstdio>
#include <limits>

#include "cli/bench_commands.h"
#include "core/file.h"
#include "server/serve_bench.h"

namespace rl::cli {

void add_bench_serve(CLI::App* bench, int* exit_code) {
  auto c = std::make_shared<server::ServeBenchConfig>();
  auto json_path = std::make_shared<std::string>();
  auto* cmd = bench->add_subcommand("serve", "Open-loop load (Poisson arrivals) against a running server");
  cmd->add_option("--url", c->url, "Server URL")->capture_default_str();
  cmd->add_option("--api-key", c->api_key, "Bearer key, if the server needs one");
  cmd->add_option("--model", c->model, "Model name (default: the first of /v1/models)");
  cmd->add_option("--request-rate", c->request_rate, "Requests per second (inf = all at once)")
      ->capture_default_str();
  cmd->add_option("--max-concurrency", c->max_concurrency, "Requests in flight at most (0 = unlimited)")
      ->capture_default_str();
  cmd->add_option("--num-prompts", c->num_prompts, "Requests to send")->capture_default_str();
  cmd->add_option("--input-len", c->input_len, "Prompt tokens per request (random ids)")->capture_default_str();
  cmd->add_option("--output-len", c->output_len, "Generated tokens per request (ignore_eos)")->capture_default_str();
  cmd->add_option("--seed", c->seed, "Seed of the prompts and arrival times")->capture_default_str();
  cmd->add_option("--json", *json_path, "Also write the results as JSON (vLLM's keys)");
  cmd->callback([c, json_path, exit_code] {
    auto r = server::run_serve_bench(*c);
    if (!r) {
      std::fprintf(stderr, "ridgeline: error: %s\n", r.message().c_str());
      *exit_code = 1;
      return;
    }
    std::fputs(server::format_report(*r).c_str(), stdout);
    if (!json_path->empty()) {
      if (Status st = write_file(*json_path, server::to_json(*r).dump(2) + "\n"); !st) {
        std::fprintf(stderr, "ridgeline: error: %s\n", st.message().c_str());
        *exit_code = 1;
        return;
      }
    }
    *exit_code = r->failed == 0 ? 0 : 1;
  });
}

}  // namespace rl::cli
