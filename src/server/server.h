// `ridgeline serve`: the OpenAI-compatible HTTP server (http_server.h, on Boost.Asio/Beast) in front of one Engine. Routes:
//   POST /v1/completions, /v1/chat/completions (SSE when "stream": true), /tokenize, /detokenize
//   GET  /v1/models, /v1/models/{id}, /health, /metrics (Prometheus), /stats (JSON for the playground),
//        / and other static files of the playground (web/)
// Errors use OpenAI's shape (api_error.h). the HTTP server's worker threads run the handlers (design.md §3); the engine
// thread only ever sees token ids and SamplingParams.
#pragma once

#include <memory>
#include <string>

#include "core/status.h"
#include "runtime/engine.h"
#include "server/http_server.h"
#include "server/openai_request.h"

namespace rl::server {

struct ServerConfig {
  std::string host = "127.0.0.1";
  int port = 8000;                       // 0: any free port (see bound_port())
  std::string api_key;                   // non-empty: /v1/*, /tokenize and /detokenize need "Bearer <key>"
  std::string served_model_name;         // "" = the model folder's name
  std::string model_dir;
  std::string web_dir;                   // "" = $RIDGELINE_WEB_DIR, else the source tree's web/
  size_t max_body_bytes = 8u << 20;
  int num_http_threads = 0;              // 0 = 2 x max_num_seqs + 32 (each open stream holds one)
  int max_queued_requests = 1024;        // parsed requests waiting for a worker; beyond: 503
  int max_num_seqs = 64;
  double health_timeout_s = 10.0;        // /health is 503 when the engine loop's heartbeat is older
  RequestLimits limits;
  std::string tool_call_parser = "auto";  // a tools::ToolParserKind name, "auto" (from template/vocab) or "none"
  std::string reasoning_parser = "auto";  // "qwen3" / "deepseek_r1", "auto" or "none"
};

struct ServerState;

class Server {
 public:
  // engine outlives the server; its loop is started here.
  static Result<std::unique_ptr<Server>> create(Engine* engine, ServerConfig config);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  Status bind();
  int bound_port() const { return port_; }
  std::string url() const;
  // Serves until stop(); call bind() first.
  void run();
  // Thread-safe; run() returns soon after.
  void stop();
  const std::string& served_model_name() const;

 private:
  Server() = default;
  void handle(const HttpRequest& req, HttpResponder& res);

  ServerConfig config_;
  std::unique_ptr<ServerState> state_;
  std::unique_ptr<HttpServer> http_;
  int port_ = -1;
};

}  // namespace rl::server
