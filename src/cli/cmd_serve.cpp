// `ridgeline serve`: loads the model, starts the engine and the OpenAI-compatible HTTP server, prints the URL
// when ready and shuts down cleanly on SIGINT/SIGTERM: the handler only raises a flag (threads started before
// main, e.g. OpenBLAS's, may receive the signal), which a watcher thread turns into Server::stop().
#include <sys/resource.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <thread>

#include "cli/commands.h"
#include "cli/engine_options.h"
#include "core/dtype.h"
#include "server/server.h"

namespace rl::cli {
namespace {

std::atomic<bool> g_stop_requested{false};
static_assert(std::atomic<bool>::is_always_lock_free, "set from a signal handler");

void on_stop_signal(int) { g_stop_requested.store(true); }

struct ServeOptions {
  ServeOptions() { engine.max_num_seqs = 0; }  // serve sizes it from the KV cache unless given
  EngineOptions engine;
  server::ServerConfig server;
  int32_t max_waiting = 1024;
};

int run(ServeOptions o) {
  std::signal(SIGINT, on_stop_signal);
  std::signal(SIGTERM, on_stop_signal);
  std::signal(SIGPIPE, SIG_IGN);  // a dropped client must not kill the process
  // Every open connection is a descriptor: take the hard limit.
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur < lim.rlim_max) {
    lim.rlim_cur = lim.rlim_max;
    setrlimit(RLIMIT_NOFILE, &lim);
  }

  // make_engine() has no queue limit: build the config here with --max-waiting added.
  EngineConfig ec;
  ec.model_dir = resolve_model_dir(o.engine.model);
  ec.device = o.engine.device;
  if (!parse_dtype(o.engine.dtype, &ec.weight_dtype)) {
    std::fprintf(stderr, "ridgeline: error: unknown --dtype %s\n", o.engine.dtype.c_str());
    return 1;
  }
  ec.dummy_weights = o.engine.dummy_weights;
  ec.quantize_int8 = o.engine.quantization == "int8";
  if (!parse_kv_cache_dtype(o.engine.kv_cache_dtype, &ec.kv_cache_dtype)) {
    std::fprintf(stderr, "ridgeline: error: unknown --kv-cache-dtype %s\n", o.engine.kv_cache_dtype.c_str());
    return 1;
  }
  ec.num_threads = o.engine.threads;
  ec.max_model_len = o.engine.max_model_len;
  ec.max_num_seqs = o.engine.max_num_seqs;
  ec.max_num_batched_tokens = o.engine.max_num_batched_tokens;
  ec.block_size = o.engine.block_size;
  ec.kv_cache_memory_bytes = static_cast<int64_t>(o.engine.kv_cache_gb * (1ll << 30));
  ec.gpu_memory_utilization = o.engine.gpu_memory_utilization;
  ec.enable_prefix_caching = !o.engine.no_prefix_caching;
  ec.hybrid_kv = !o.engine.no_hybrid_kv;
  ec.max_waiting = o.max_waiting;
  ec.enforce_eager = o.engine.enforce_eager;
  ec.speculative = o.engine.speculative;
  ec.num_speculative_tokens = o.engine.num_speculative_tokens;
  ec.draft_model_dir = o.engine.draft_model;
  ec.ngram_min = o.engine.ngram_min;
  ec.ngram_max = o.engine.ngram_max;
  ec.speculative_adaptive = o.engine.speculative_adaptive == "on";
  ec.speculative_max_running = o.engine.speculative_max_running;
  ec.tensor_parallel_size = o.engine.tensor_parallel_size;
  ec.served_model_name = o.server.served_model_name;
  o.server.model_dir = ec.model_dir;
  {
    auto engine_r = Engine::create(ec);
    if (!engine_r) {
      std::fprintf(stderr, "ridgeline: error: %s\n", engine_r.message().c_str());
      return 1;
    }
    std::unique_ptr<Engine> engine = std::move(*engine_r);
    o.server.max_num_seqs = engine->max_num_seqs();  // resolved: sized from the KV cache when 0
    auto server_r = server::Server::create(engine.get(), o.server);
    if (!server_r) {
      std::fprintf(stderr, "ridgeline: error: %s\n", server_r.message().c_str());
      return 1;
    }
    server::Server& srv = **server_r;
    if (Status st = srv.bind(); !st) {
      std::fprintf(stderr, "ridgeline: error: %s\n", st.message().c_str());
      return 1;
    }
    std::atomic<bool> finished{false};
    std::thread waiter([&] {
      while (!finished.load()) {
        if (g_stop_requested.load()) {
          std::fprintf(stderr, "ridgeline: shutting down\n");
          srv.stop();
          return;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
    });
    std::printf("ridgeline: serving %s at %s (max_model_len %d, max_num_seqs %d, %lld KV blocks)\n",
                srv.served_model_name().c_str(), srv.url().c_str(), engine->max_model_len(), engine->max_num_seqs(),
                static_cast<long long>(engine->num_kv_blocks()));
    if (engine->tensor_parallel_size() > 1) {
      std::printf("ridgeline: tensor parallel over %d ranks\n", engine->tensor_parallel_size());
    }
    std::fflush(stdout);
    srv.run();
    finished = true;
    waiter.join();
    engine->stop();
  }
  return 0;
}

}  // namespace

void add_serve_command(CLI::App& app, int* exit_code) {
  auto o = std::make_shared<ServeOptions>();
  auto* cmd = app.add_subcommand("serve", "OpenAI-compatible HTTP server with a web playground");
  add_engine_options(cmd, &o->engine);
  cmd->add_option("--host", o->server.host, "Address to listen on (loopback by default)")->capture_default_str();
  cmd->add_option("--port", o->server.port, "Port (0 = any free port; the URL is printed)")->capture_default_str();
  cmd->add_option("--api-key", o->server.api_key, "Require \"Authorization: Bearer KEY\" on the API routes");
  cmd->add_option("--served-model-name", o->server.served_model_name,
                  "The model's name in the API (default: the model folder's name)");
  cmd->add_option("--max-waiting", o->max_waiting, "Requests that may wait for a slot before new ones get 503")
      ->capture_default_str();
  cmd->add_option("--max-body-bytes", o->server.max_body_bytes, "Largest request body (413 above)")
      ->capture_default_str();
  cmd->add_option("--http-threads", o->server.num_http_threads,
                  "HTTP worker threads; each request in progress holds one (0 = 2 x max-num-seqs + 32)")
      ->capture_default_str();
  cmd->add_option("--tool-call-parser", o->server.tool_call_parser,
                  "Tool-call format: hermes, llama3_json, mistral, harmony, deepseek_v3, auto (from the chat "
                  "template and vocabulary) or none")
      ->capture_default_str();
  cmd->add_option("--reasoning-parser", o->server.reasoning_parser,
                  "Reasoning format: qwen3 (<think> tags; also deepseek_r1), auto or none")
      ->capture_default_str();
  cmd->add_option("--web-dir", o->server.web_dir, "Playground folder (default: the source tree's web/)");
  cmd->callback([o, exit_code] { *exit_code = run(*o); });
}

}  // namespace rl::cli
