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

void handle_tokenize(ServerState& s, const httplib::Request& req, httplib::Response& res) {
  Result<OrderedJson> body = parse_ordered_json(req.body, "request body");
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

void handle_detokenize(ServerState& s, const httplib::Request& req, httplib::Response& res) {
  Result<OrderedJson> body = parse_ordered_json(req.body, "request body");
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

void handle_stats(ServerState& s, httplib::Response& res) {
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
  send_json(res, out);
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
  s->http_ = std::make_unique<httplib::Server>();
  s->add_routes();
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
  if (config_.port == 0) {
    port_ = http_->bind_to_any_port(config_.host);
  } else if (http_->bind_to_port(config_.host, config_.port)) {
    port_ = config_.port;
  }
  if (port_ <= 0) {
    return Status::error("cannot listen on " + config_.host + ":" + std::to_string(config_.port) +
                         " (address in use, or not an address of this machine)");
  }
  return Status::ok();
}

void Server::run() { http_->listen_after_bind(); }

void Server::stop() { http_->stop(); }

void Server::add_routes() {
  httplib::Server& h = *http_;
  ServerState& s = *state_;
  const int threads = config_.num_http_threads > 0 ? config_.num_http_threads : 2 * config_.max_num_seqs + 32;
  h.new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<size_t>(threads)); };
  h.set_payload_max_length(config_.max_body_bytes);
  h.set_read_timeout(10, 0);
  h.set_write_timeout(10, 0);

  const std::string key = config_.api_key;
  h.set_pre_routing_handler([key](const httplib::Request& req, httplib::Response& res) {
    if (key.empty() || !needs_key(req.path)) return httplib::Server::HandlerResponse::Unhandled;
    if (req.get_header_value("Authorization") == "Bearer " + key) return httplib::Server::HandlerResponse::Unhandled;
    send_error(res, unauthorized());
    return httplib::Server::HandlerResponse::Handled;
  });
  // httplib's own failures (no route, body too large, malformed request) get OpenAI-shaped bodies; errors our
  // handlers produced already have one.
  const size_t max_body = config_.max_body_bytes;
  h.set_error_handler(httplib::Server::HandlerWithResponse([max_body](const httplib::Request& req,
                                                                      httplib::Response& res) {
    if (!res.body.empty() || res.is_chunked_content_provider_) return httplib::Server::HandlerResponse::Unhandled;
    ApiError e;
    if (res.status == 404) {
      e = known_path(req.path) ? method_not_allowed(req.method, req.path)
                               : not_found("Unknown route: " + req.method + " " + req.path);
    } else if (res.status == 413) {
      e = payload_too_large(max_body);
    } else if (res.status < 500) {
      e = ApiError{res.status, "Malformed HTTP request", "invalid_request_error", "", ""};
    } else {
      e = internal_error("internal server error");
    }
    send_error(res, e);
    return httplib::Server::HandlerResponse::Handled;
  }));
  h.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "unknown exception";
    try {
      if (ep) std::rethrow_exception(ep);
    } catch (const std::exception& ex) {
      what = ex.what();
    } catch (...) {
    }
    log_error("handler failed: " + what);
    send_error(res, internal_error("internal server error: " + what));
  });

  const double health_timeout = config_.health_timeout_s;
  h.Get("/health", [&s, health_timeout](const httplib::Request&, httplib::Response& res) {
    const bool ok = s.engine->alive() && now_seconds() - s.engine->last_heartbeat() < health_timeout;
    if (!ok) return send_error(res, ApiError{503, "the engine loop is not running", "server_error", "", "unhealthy"});
    res.set_content("{\"status\":\"ok\"}", "application/json");
  });
  h.Get("/metrics", [&s](const httplib::Request&, httplib::Response& res) {
    res.set_content(s.engine->metrics().render(), "text/plain; version=0.0.4; charset=utf-8");
  });
  h.Get("/stats", [&s](const httplib::Request&, httplib::Response& res) { handle_stats(s, res); });
  h.Get("/v1/models", [&s](const httplib::Request&, httplib::Response& res) {
    OrderedJson out = OrderedJson::object();
    out["object"] = "list";
    out["data"] = OrderedJson::array({model_card(s)});
    send_json(res, out);
  });
  h.Get("/v1/models/(.+)", [&s](const httplib::Request& req, httplib::Response& res) {
    if (req.matches[1] != s.model.served_model_name) {
      return send_error(res, not_found("The model '" + std::string(req.matches[1]) + "' does not exist",
                                       "model_not_found"));
    }
    send_json(res, model_card(s));
  });
  h.Post("/v1/completions", [&s](const httplib::Request& req, httplib::Response& res) {
    handle_generate(s, Endpoint::kCompletions, req, res);
  });
  h.Post("/v1/chat/completions", [&s](const httplib::Request& req, httplib::Response& res) {
    handle_generate(s, Endpoint::kChat, req, res);
  });
  h.Post("/tokenize", [&s](const httplib::Request& req, httplib::Response& res) { handle_tokenize(s, req, res); });
  h.Post("/detokenize",
         [&s](const httplib::Request& req, httplib::Response& res) { handle_detokenize(s, req, res); });
  if (!config_.web_dir.empty() && file_exists(path_join(config_.web_dir, "index.html"))) {
    h.set_mount_point("/", config_.web_dir);
  } else {
    log_warn("playground not found (web dir '" + config_.web_dir + "'): GET / answers 404");
  }
}

}  // namespace rl::server
