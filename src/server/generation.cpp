#include "server/generation.h"

#include <algorithm>

#include "core/log.h"

namespace rl::server {

Generation::Generation(Engine* engine, const Tokenizer* tokenizer, std::string id,
                       GenerationRequest request)
    : engine_(engine), tokenizer_(tokenizer), id_(std::move(id)), request_(std::move(request)) {
  const size_t num_choices = request_.prompts.size() * static_cast<size_t>(request_.params.n);
  choices_.resize(num_choices);
  const bool parsed = request_.parse_mode.active();
  if (parsed) eos_ids_ = engine_->eos_token_ids();
  for (size_t i = 0; i < choices_.size(); ++i) {
    Choice& c = choices_[i];
    // Tool-call markers are often special tokens: a parsed choice keeps them in its text.
    c.text = std::make_unique<TextStream>(*tokenizer_, request_.params.stop, request_.skip_special_tokens && !parsed);
    if (parsed) c.parse = std::make_unique<tools::ToolStream>(request_.parse_mode, id_ + "-" + std::to_string(i));
    // echo: the prompt text leads the choice's first delta.
    const size_t prompt = i / static_cast<size_t>(request_.params.n);
    if (prompt < request_.echo_text.size()) c.echo = request_.echo_text[prompt];
  }
}

Generation::~Generation() { abort(); }

void Generation::start() {
  if (started_) return;
  started_ = true;
  // n > 1 fans out in the engine (one submit per prompt, choices stopped one by one).
  const int32_t n = request_.params.n;
  for (size_t p = 0; p < request_.prompts.size(); ++p) {
    Sub sub;
    sub.prompt_index = static_cast<int32_t>(p);
    sub.first_choice = static_cast<int32_t>(p) * n;
    sub.engine_id = id_ + "-" + std::to_string(p);
    sub.channel = engine_->submit(sub.engine_id, request_.prompts[p], request_.params);
    subs_.push_back(std::move(sub));
  }
}

bool Generation::done() const {
  if (error_) return true;
  return std::all_of(subs_.begin(), subs_.end(), [](const Sub& s) { return s.closed; });
}

void Generation::abort() {
  for (Sub& s : subs_) {
    if (s.closed || s.aborted) continue;
    engine_->abort(s.engine_id, FinishReason::kAbort);
    s.aborted = true;
  }
}

Usage Generation::usage() const {
  Usage u;
  for (const auto& p : request_.prompts) u.prompt_tokens += static_cast<int64_t>(p.size());
  for (const Choice& c : choices_) u.completion_tokens += c.num_tokens;
  u.cached_tokens = cached_tokens_;
  return u;
}

std::vector<ChoiceDelta> Generation::poll(double timeout_s) {
  std::vector<ChoiceDelta> deltas;
  bool got = false;
  for (size_t i = 0; i < subs_.size() && !error_; ++i) {
    Sub& s = subs_[i];
    while (!s.closed && !error_) {
      std::optional<RequestOutput> out = s.channel->pop_for(0.0);
      if (!out) {
        s.closed = s.channel->closed();
        break;
      }
      got = true;
      handle(s, std::move(*out), &deltas);
    }
  }
  if (got || done()) return deltas;
  // Nothing ready: block on the first open channel (briefly when there are others to watch).
  size_t open = 0;
  Sub* first = nullptr;
  for (Sub& s : subs_) {
    if (s.closed) continue;
    open++;
    if (!first) first = &s;
  }
  std::optional<RequestOutput> out = first->channel->pop_for(open == 1 ? timeout_s : std::min(timeout_s, 0.005));
  if (out) {
    handle(*first, std::move(*out), &deltas);
  } else {
    first->closed = first->channel->closed();
  }
  return deltas;
}

void Generation::add_prompt_logprob(Choice& c, size_t prompt, const TokenOutput& t) const {
  const std::vector<TokenId>& ids = request_.prompts[prompt];
  if (request_.echo_logprobs) {
    if (c.echo_logprobs.empty()) {  // the first prompt token has no logprob
      LogprobEntry first;
      const TokenId one[1] = {ids.front()};
      first.token = tokenizer_->decode_raw(one, false);
      first.null_logprob = true;
      c.echo_logprobs.push_back(std::move(first));
    }
    TokenOutput echo = t;
    const auto n = static_cast<size_t>(request_.params.logprobs.value_or(0));
    if (echo.top_logprobs.size() > n) echo.top_logprobs.resize(n);
    c.echo_logprobs.push_back(logprob_entry(echo));
  }
  if (request_.prompt_logprobs) {
    PromptLogprobEntry e;
    const auto item = [&](TokenId token, float logprob, int32_t rank) {
      const TokenId one[1] = {token};
      e.items.push_back({token, logprob, rank, tokenizer_->decode_raw(one, false)});
    };
    item(t.token, t.logprob.value_or(0.0f), t.rank);
    const auto n = static_cast<size_t>(*request_.prompt_logprobs);
    for (size_t k = 0; k < t.top_logprobs.size() && k < n; ++k) {
      if (t.top_logprobs[k].token != t.token) {
        item(t.top_logprobs[k].token, t.top_logprobs[k].logprob, static_cast<int32_t>(k + 1));
      }
    }
    c.prompt_logprobs.push_back(std::move(e));
  }
}

void Generation::flush_lead(Choice& c, ChoiceDelta* d) {
  if (!c.lead_pending) return;
  c.lead_pending = false;
  d->text += c.echo;
  c.echo.clear();
  for (LogprobEntry& e : c.echo_logprobs) d->logprobs.push_back(std::move(e));
  c.echo_logprobs.clear();
  d->prompt_logprobs = std::move(c.prompt_logprobs);
  c.prompt_logprobs.clear();
}

ChoiceDelta& Generation::delta_for(int32_t index, std::vector<ChoiceDelta>* deltas) {
  for (ChoiceDelta& d : *deltas) {
    if (d.index == index) return d;
  }
  deltas->emplace_back();
  deltas->back().index = index;
  return deltas->back();
}

LogprobEntry Generation::logprob_entry(const TokenOutput& t) const {
  LogprobEntry e;
  const TokenId one[1] = {t.token};
  e.token = tokenizer_->decode_raw(one, false);
  e.logprob = t.logprob.value_or(0.0f);
  for (const TokenLogprob& alt : t.top_logprobs) {
    const TokenId a[1] = {alt.token};
    e.top.emplace_back(tokenizer_->decode_raw(a, false), alt.logprob);
  }
  return e;
}

namespace {
// Appends a stream's tool-call deltas to the choice's pending delta: argument fragments of the call the pending
// delta already continues are joined, but never into a call's announcement, which keeps its "" arguments (as
// OpenAI streams it), even when several tokens' text is sent in one chunk.
void merge_tool_calls(tools::StreamDelta& sd, ChoiceDelta* d) {
  for (tools::ToolCallDelta& t : sd.tool_calls) {
    auto& pending = d->tool_calls;
    if (!pending.empty() && pending.back().index == t.index && pending.back().id.empty() && t.id.empty()) {
      pending.back().arguments += t.arguments;
    } else {
      pending.push_back(std::move(t));
    }
  }
}
}  // namespace

void Generation::add_text(Choice& c, const std::string& text, ChoiceDelta* d) {
  if (!c.parse) {
    d->text += text;
    return;
  }
  if (text.empty()) return;
  tools::StreamDelta sd = c.parse->push(text);
  d->text += sd.content;
  d->reasoning += sd.reasoning;
  merge_tool_calls(sd, d);
}

void Generation::finish_text(Choice& c, ChoiceDelta* d) {
  if (!c.parse) return;
  tools::StreamDelta sd = c.parse->finish();
  d->text += sd.content;
  d->reasoning += sd.reasoning;
  merge_tool_calls(sd, d);
  d->tool_calls_finish = !c.parse->snapshot().calls.empty();
}

void Generation::handle(Sub& sub, RequestOutput&& out, std::vector<ChoiceDelta>* deltas) {
  if (out.finish == FinishReason::kError) {
    if (out.add_error == AddError::kRejected) {
      error_ = bad_request(out.error);
    } else if (out.add_error == AddError::kQueueFull) {
      error_ = overloaded("The server is busy (request queue full); retry later: " + out.error);
    } else {
      error_ = internal_error("generation failed: " + out.error);
      log_error("request " + id_ + ": " + out.error);
    }
    abort();
    return;
  }
  const int32_t index = sub.first_choice + out.index;
  if (index < 0 || index >= static_cast<int32_t>(choices_.size())) return;
  Choice& c = choices_[static_cast<size_t>(index)];
  admitted_ = true;
  // Prompt logprobs come with the engine's choice 0; every choice of the prompt reports them.
  for (const TokenOutput& t : out.prompt_logprobs) {
    for (int32_t k = 0; k < request_.params.n; ++k) {
      Choice& ck = choices_[static_cast<size_t>(sub.first_choice + k)];
      if (ck.lead_pending) add_prompt_logprob(ck, static_cast<size_t>(sub.prompt_index), t);
    }
  }
  for (const TokenOutput& t : out.tokens) {
    if (c.finished) break;
    ChoiceDelta& d = delta_for(index, deltas);
    flush_lead(c, &d);
    c.num_tokens++;
    if (request_.want_logprobs) d.logprobs.push_back(logprob_entry(t));
    // The token that ended a parsed choice (EOS, <|im_end|>, <|call|>, ...) is not part of its text.
    if (c.parse && std::find(eos_ids_.begin(), eos_ids_.end(), t.token) != eos_ids_.end()) continue;
    TextStream::Piece piece = c.text->push(t.token);
    add_text(c, piece.text, &d);
    if (piece.stopped) {
      finish_text(c, &d);
      c.finished = true;
      c.finish = FinishReason::kStop;
      d.finish = FinishReason::kStop;
      engine_->abort(sub.engine_id, FinishReason::kStop, out.index);
    }
  }
  if (out.finish == FinishReason::kNone) return;
  if (index % request_.params.n == 0) cached_tokens_ += out.num_cached_tokens;  // once per prompt
  if (!c.finished) {
    if (out.finish == FinishReason::kAbort) {
      // Only the engine stopping aborts a request this generation did not abort itself.
      error_ = overloaded("the request was aborted: the server is shutting down");
      abort();
      return;
    }
    ChoiceDelta& d = delta_for(index, deltas);
    flush_lead(c, &d);
    add_text(c, c.text->finish(), &d);
    finish_text(c, &d);
    c.finished = true;
    c.finish = out.finish;
    d.finish = out.finish;
  }
}

}  // namespace rl::server
