#include "server/server.h"

#include <cstdlib>
#include <ctime>
#include <random>

#include "core/file.h"
#include "core/log.h"
#include "server/openai_response.h"
#include "server/server_state.h"

#ifndef RIDGELINE_WEB_DIR
#define RIDGELINE_WEB_DIR ""
#endif

namespace rl::server {
namespace {

std::string basename_of(std::string dir) {
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  const size_t slash = dir.find_last_of('/');
  return slash == std::string::npos ? dir : dir.substr(slash + 1);
}

bool needs_key(const std::string& path) {
  return path.rfind("/v1/", 0) == 0 || path == "/tokenize" || path == "/detokenize";
}

// Paths with a handler for some method: a request for one of them with another method is a 405, not a 404.
bool known_path(const std::string& path) {
  for (const char* p : {"/health", "/metrics", "/stats", "/v1/models", "/v1/completions", "/v1/chat/completions",
                        "/tokenize", "/detokenize"}) {
    if (path == p) return true;
  }
  return path.rfind("/v1/models/", 0) == 0;
}

OrderedJson model_card(const ServerState& s) {
  OrderedJson m = OrderedJson::object();
  m["id"] = s.model.served_model_name;
  m["object"] = "model";
  m["created"] = s.started_unix;
  m["owned_by"] = "ridgeline";
  m["root"] = s.model_dir;
  m["parent"] = nullptr;
  m["max_model_len"] = s.model.max_model_len;
  m["vocab_size"] = s.model.vocab_size;
  return m;
}

void handle_tokenize(ServerState& s, const HttpRequest& req, HttpResponder& res) {
  Result<OrderedJson> body = parse_ordered_json(req.body, "request body", kMaxRequestDepth);
  if (!body) return send_error(res, bad_request("Invalid JSON in the request body: " + body.message(), "invalid_json"));
  if (MaybeError e = check_model(*body, s.model.served_model_name)) return send_error(res, *e);
  std::vector<TokenId> ids;
  if (MaybeError e = tokenize_request(*body, s.model, &ids)) return send_error(res, *e);
  bool strs = false;
  if (MaybeError e = read_bool(*body, "return_token_strs", &strs)) return send_error(res, *e);
  OrderedJson out = OrderedJson::object();
  out["count"] = ids.size();
  out["max_model_len"] = s.model.max_model_len;
  out["tokens"] = ids;
  if (strs) {
    OrderedJson t = OrderedJson::array();
    for (TokenId id : ids) t.push_back(s.model.tokenizer->id_to_token(id));
    out["token_strs"] = std::move(t);
  }
  send_json(res, out);
}

void handle_detokenize(ServerState& s, const HttpRequest& req, HttpResponder& res) {
  Result<OrderedJson> body = parse_ordered_json(req.body, "request body", kMaxRequestDepth);
  if (!body) return send_error(res, bad_request("Invalid JSON in the request body: " + body.message(), "invalid_json"));
  if (MaybeError e = check_model(*body, s.model.served_model_name)) return send_error(res, *e);
  if (!body->is_object()) return send_error(res, bad_request("the request body must be a JSON object"));
  const OrderedJson* tokens = field(*body, "tokens");
  if (!tokens || !tokens->is_array()) return send_error(res, invalid_param("tokens", "'tokens' must be an array"));
  std::vector<TokenId> ids;
  for (const auto& v : *tokens) {
    int64_t id = 0;
    if (MaybeError e = as_int(v, "tokens", 0, s.model.vocab_size - 1, &id)) return send_error(res, *e);
    ids.push_back(static_cast<TokenId>(id));
  }
  OrderedJson out = OrderedJson::object();
  out["prompt"] = s.model.tokenizer->decode(ids, false);
  send_json(res, out);
}

void handle_stats(ServerState& s, HttpResponder& res) {
  const SchedulerStats st = s.engine->stats();
  OrderedJson out = OrderedJson::object();
  out["model"] = s.model.served_model_name;
  out["num_requests_running"] = st.num_running;
  out["num_requests_waiting"] = st.num_waiting;
  out["kv_cache_usage"] = st.kv_usage;
  out["prefix_cache_queries"] = st.prefix_cache_queries;
  out["prefix_cache_hits"] = st.prefix_cache_hits;
  out["prompt_tokens_total"] = st.num_prompt_tokens;
  out["generation_tokens_total"] = st.num_generation_tokens;
  out["max_model_len"] = s.model.max_model_len;
  out["max_num_seqs"] = s.engine->max_num_seqs();
  send_json(res, out);
}

// The API key, when one is set, guards the API paths; the constant-time compare keeps the key's prefix secret.
bool authorized(const std::string& key, const HttpRequest& req) {
  if (key.empty() || !needs_key(req.path)) return true;
  const std::string got = req.header("Authorization");
  const std::string want = "Bearer " + key;
  if (got.size() != want.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < want.size(); ++i) diff |= static_cast<unsigned char>(got[i] ^ want[i]);
  return diff == 0;
}

}  // namespace

Result<std::unique_ptr<Server>> Server::create(Engine* engine, ServerConfig config) {
  if (!engine->tokenizer()) return Status::error("serve needs a model folder with tokenizer.json");
  std::unique_ptr<Server> s(new Server());
  auto st = std::make_unique<ServerState>();
  st->engine = engine;
  st->model_dir = config.model_dir;
  if (config.served_model_name.empty()) config.served_model_name = basename_of(config.model_dir);
  if (config.web_dir.empty()) {
    const char* env = std::getenv("RIDGELINE_WEB_DIR");
    config.web_dir = env && *env ? env : RIDGELINE_WEB_DIR;
  }
  if (config.web_dir.empty() || !file_exists(path_join(config.web_dir, "index.html"))) {
    log_warn("playground not found (web dir '" + config.web_dir + "'): GET / answers 404");
    config.web_dir.clear();
  }
  Result<ChatTemplate> tmpl = ChatTemplate::from_model_dir(config.model_dir);
  if (tmpl) {
    st->chat_template = std::make_unique<ChatTemplate>(std::move(*tmpl));
  } else {
    log_warn("no chat template (" + tmpl.message() + "): /v1/chat/completions will answer 400");
  }
  auto structured = StructuredContext::create(*engine->tokenizer(), engine->tokenizer()->chat_template(),
                                              engine->eos_token_ids(), config.tool_call_parser,
                                              config.reasoning_parser);
  if (!structured) return structured.status();
  st->structured = std::move(structured).value();
  log_info(std::string("tool-call parser: ") + tools::tool_parser_name(st->structured->tool_parser()) +
           ", reasoning parser: " +
           (st->structured->reasoning() == tools::ReasoningKind::kThinkTags ? "think tags" : "none"));
  ModelContext& m = st->model;
  m.structured = st->structured.get();
  m.served_model_name = config.served_model_name;
  m.tokenizer = engine->tokenizer();
  m.chat_template = st->chat_template.get();
  m.generation_config = &engine->generation_config();
  m.max_model_len = engine->max_model_len();
  m.vocab_size = static_cast<int32_t>(engine->model_config().vocab_size);
  m.limits = config.limits;
  std::random_device rd;
  char prefix[24];
  std::snprintf(prefix, sizeof prefix, "%08x%08x-", rd(), rd());
  st->id_prefix = prefix;
  st->started_unix = static_cast<int64_t>(std::time(nullptr));
  s->state_ = std::move(st);
  s->config_ = std::move(config);

  HttpServerConfig hc;
  hc.host = s->config_.host;
  hc.port = s->config_.port;
  hc.limits.max_body_bytes = s->config_.max_body_bytes;
  hc.num_workers = s->config_.num_http_threads > 0 ? s->config_.num_http_threads
                                                   : 2 * s->config_.max_num_seqs + 32;
  hc.max_queued = s->config_.max_queued_requests;
  Server* self = s.get();
  s->http_ = std::make_unique<HttpServer>(
      hc, [self](const HttpRequest& req, HttpResponder& res) { self->handle(req, res); },
      [](const HttpError& e) {
        ApiError a{e.status, e.message, e.status >= 500 ? "server_error" : "invalid_request_error", "", e.code};
        if (e.status == 503) a.type = "server_overloaded";
        return a.body();
      });
  engine->start();
  return s;
}

Server::~Server() = default;

const std::string& Server::served_model_name() const { return state_->model.served_model_name; }

std::string Server::url() const {
  const std::string host = config_.host == "0.0.0.0" ? "127.0.0.1" : config_.host;
  return "http://" + host + ":" + std::to_string(port_);
}

Status Server::bind() {
  RL_RETURN_IF_ERROR(http_->bind());
  port_ = http_->port();
  return Status::ok();
}

void Server::run() { http_->run(); }

void Server::stop() { http_->stop(); }

void Server::handle(const HttpRequest& req, HttpResponder& res) {
  ServerState& s = *state_;
  if (!authorized(config_.api_key, req)) return send_error(res, unauthorized());
  const std::string& path = req.path;
  const bool get = req.method == "GET" || req.method == "HEAD";
  const bool post = req.method == "POST";
  if (get && path == "/health") {
    const bool ok = s.engine->alive() && now_seconds() - s.engine->last_heartbeat() < config_.health_timeout_s;
    if (!ok) return send_error(res, ApiError{503, "the engine loop is not running", "server_error", "", "unhealthy"});
    return res.send(200, "application/json", "{\"status\":\"ok\"}");
  }
  if (get && path == "/metrics") {
    return res.send(200, "text/plain; version=0.0.4; charset=utf-8", s.engine->metrics().render());
  }
  if (get && path == "/stats") return handle_stats(s, res);
  if (get && path == "/v1/models") {
    OrderedJson out = OrderedJson::object();
    out["object"] = "list";
    out["data"] = OrderedJson::array({model_card(s)});
    return send_json(res, out);
  }
  if (get && path.rfind("/v1/models/", 0) == 0 && path.size() > 11) {
    const std::string id = path.substr(11);
    if (id != s.model.served_model_name) {
      return send_error(res, not_found("The model '" + id.substr(0, 256) + "' does not exist", "model_not_found"));
    }
    return send_json(res, model_card(s));
  }
  if (post && path == "/v1/completions") return handle_generate(s, Endpoint::kCompletions, req, res);
  if (post && path == "/v1/chat/completions") return handle_generate(s, Endpoint::kChat, req, res);
  if (post && path == "/tokenize") return handle_tokenize(s, req, res);
  if (post && path == "/detokenize") return handle_detokenize(s, req, res);
  if (known_path(path)) return send_error(res, method_not_allowed(req.method.substr(0, 32), path.substr(0, 256)));
  if (get && !config_.web_dir.empty() && serve_static(config_.web_dir, req, res)) return;
  send_error(res, not_found("Unknown route: " + req.method.substr(0, 32) + " " + path.substr(0, 256)));
}

}  // namespace rl::server
