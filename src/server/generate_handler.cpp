// POST /v1/completions and /v1/chat/completions. The worker thread parses, templates and tokenizes, submits, and
// waits for the first engine output so that admission errors (400, 503) still get their HTTP status. Then the
// response is written chunked while the worker polls the generation: SSE events for streams, the whole JSON
// object for the rest. A failed write means the client went away: the generation is aborted, which frees
// its KV within one engine step. While a non-streamed request runs, a space is written every second of silence
// (JSON allows leading whitespace) so that a disconnect is noticed there too.
#include <ctime>

#include "core/log.h"
#include "server/openai_response.h"
#include "server/server_state.h"

namespace rl::server {
namespace {

constexpr double kPollSeconds = 0.05;
constexpr double kHeartbeatSeconds = 1.0;

std::string sse(const OrderedJson& j) { return "data: " + dump_json(j) + "\n\n"; }

struct ResponseWriter {
  std::shared_ptr<Generation> gen;
  ResponseMeta meta;
  bool stream = false;
  bool include_usage = false;
  std::vector<ChoiceDelta> pending;   // produced while waiting for admission
  std::vector<ChoiceResult> results;  // non-streamed: accumulated per choice
  std::vector<int64_t> text_offsets;  // streamed completions logprobs: per choice
  bool started = false;
  bool finished = false;
  double last_write = 0;

  bool write(HttpResponder& sink, const std::string& s) {
    if (!sink.write(s)) {
      gen->abort();
      return false;
    }
    last_write = now_seconds();
    return true;
  }

  bool emit(HttpResponder& sink, std::vector<ChoiceDelta>& deltas) {
    for (ChoiceDelta& d : deltas) {
      const size_t i = static_cast<size_t>(d.index);
      if (d.text.empty() && !d.finish && d.logprobs.empty() && d.reasoning.empty() && d.tool_calls.empty())
        continue;  // e.g. a skipped special token
      if (stream) {
        if (!write(sink, sse(delta_chunk(meta, d, &text_offsets[i])))) return false;
      } else {
        accumulate(&results[i], std::move(d));
      }
    }
    return true;
  }

  // One round of polling and writing; false when the response is complete or the client is gone.
  bool pump(HttpResponder& sink) {
    if (!started) {
      started = true;
      last_write = now_seconds();
      if (stream && meta.endpoint == Endpoint::kChat) {
        for (size_t i = 0; i < results.size(); ++i) {
          if (!write(sink, sse(role_chunk(meta, static_cast<int32_t>(i))))) return false;
        }
      }
      if (!emit(sink, pending)) return false;
      pending.clear();
    }
    if (!gen->done()) {
      std::vector<ChoiceDelta> deltas = gen->poll(kPollSeconds);
      if (!emit(sink, deltas)) return false;
      if (!gen->done() && now_seconds() - last_write > kHeartbeatSeconds) {
        if (!write(sink, stream ? ": keep-alive\n\n" : " ")) return false;
      }
      if (!gen->done()) return true;
    }
    finished = true;
    if (stream) {
      if (gen->error()) {
        if (!write(sink, sse(gen->error()->to_json()))) return false;
      } else if (include_usage) {
        if (!write(sink, sse(usage_chunk(meta, gen->usage())))) return false;
      }
      if (!write(sink, "data: [DONE]\n\n")) return false;
    } else {
      // The status line is gone already: a late failure can only be reported in the body.
      const std::string body = gen->error() ? gen->error()->body() : dump_json(full_response(meta, results, gen->usage()));
      if (!write(sink, body)) return false;
    }
    return false;
  }
};

}  // namespace

void send_error(HttpResponder& res, const ApiError& e) {
  HttpHeaders h;
  if (e.status == 503) h.emplace_back("Retry-After", "1");
  res.send(e.status, "application/json", e.body(), std::move(h));
}

void send_json(HttpResponder& res, const OrderedJson& j, int status) {
  res.send(status, "application/json", dump_json(j));
}

void handle_generate(ServerState& state, Endpoint endpoint, const HttpRequest& req, HttpResponder& res) {
  Result<OrderedJson> body = parse_ordered_json(req.body, "request body", kMaxRequestDepth);
  if (!body) return send_error(res, bad_request("Invalid JSON in the request body: " + body.message(), "invalid_json"));
  if (MaybeError e = check_model(*body, state.model.served_model_name)) return send_error(res, *e);
  GenerationRequest greq;
  MaybeError err = endpoint == Endpoint::kChat ? parse_chat_request(*body, state.model, &greq)
                                               : parse_completion_request(*body, state.model, &greq);
  if (err) return send_error(res, *err);

  auto w = std::make_shared<ResponseWriter>();
  w->meta.id = state.new_id(endpoint == Endpoint::kChat ? "chatcmpl" : "cmpl");
  w->meta.created = static_cast<int64_t>(std::time(nullptr));
  w->meta.model = state.model.served_model_name;
  w->meta.endpoint = endpoint;
  w->meta.want_logprobs = greq.want_logprobs;
  w->meta.want_prompt_logprobs = greq.prompt_logprobs.has_value();
  w->meta.system_fingerprint = state.engine->system_fingerprint();
  w->stream = greq.stream;
  w->include_usage = greq.include_usage;
  const size_t num_choices = greq.prompts.size() * static_cast<size_t>(greq.params.n);
  w->results.resize(num_choices);
  w->text_offsets.assign(num_choices, 0);
  w->gen = std::make_shared<Generation>(state.engine, state.model.tokenizer, w->meta.id,
                                        std::move(greq));
  w->gen->start();
  while (!w->gen->admitted() && !w->gen->done()) {
    std::vector<ChoiceDelta> d = w->gen->poll(0.1);
    for (ChoiceDelta& x : d) w->pending.push_back(std::move(x));
  }
  if (w->gen->error() && !w->gen->admitted()) return send_error(res, *w->gen->error());

  if (!res.start(200, w->stream ? "text/event-stream" : "application/json", {{"Cache-Control", "no-cache"}})) {
    w->gen->abort();
    return;
  }
  while (w->pump(res)) {
  }
  if (!w->finished) w->gen->abort();
}

}  // namespace rl::server
