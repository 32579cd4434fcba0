// What every HTTP handler shares: the engine, the parsing context (tokenizer, chat template, limits), the
// metrics and the request-id source. Handlers run on the HTTP server's worker threads; everything here is thread-safe
// (the engine's submit/abort/stats/metrics, the tokenizer's and the chat template's const methods).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "chat/chat_template.h"
#include "runtime/engine.h"
#include "server/api_error.h"
#include "server/http_server.h"
#include "server/openai_request.h"
#include "server/structured_output.h"

namespace rl::server {

struct ServerState {
  Engine* engine = nullptr;
  std::string model_dir;
  std::unique_ptr<ChatTemplate> chat_template;  // null when the model has none
  std::unique_ptr<StructuredContext> structured;  // grammars (their cache) and the tool/reasoning parsers
  ModelContext model;
  std::string id_prefix;  // random per server start, so ids never repeat across restarts
  std::atomic<uint64_t> next_id{1};
  int64_t started_unix = 0;

  // "cmpl-<prefix><counter>": unique among live requests (the engine requires it).
  std::string new_id(const char* kind) { return std::string(kind) + "-" + id_prefix + std::to_string(next_id++); }
};

void send_error(HttpResponder& res, const ApiError& e);
void send_json(HttpResponder& res, const OrderedJson& j, int status = 200);

// POST /v1/completions and /v1/chat/completions, streamed (SSE) or not.
void handle_generate(ServerState& state, Endpoint endpoint, const HttpRequest& req, HttpResponder& res);

// GET/HEAD of a file under web_dir (the playground); false when there is no such file (the caller answers 404).
bool serve_static(const std::string& web_dir, const HttpRequest& req, HttpResponder& res);

}  // namespace rl::server
