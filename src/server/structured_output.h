// Structured outputs and tool calling on the request side: response_format (json_object, json_schema), vLLM's
// guided_json / guided_regex / guided_choice / guided_grammar, and tools + tool_choice ("required" and a named
// function are enforced with a grammar, as vLLM does: the model writes a JSON list of calls, or the named
// function's arguments). The grammar becomes the request's TokenConstraint; compiled grammars (with their token
// mask caches) are shared through an LRU cache keyed by the grammar's text. Errors are 400s naming the field and,
// for schemas, the unsupported keyword.
#pragma once

#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "grammar/matcher.h"
#include "server/json_fields.h"
#include "tools/tool_stream.h"

namespace rl::server {

struct GenerationRequest;
struct ModelContext;

class StructuredContext {
 public:
  // tool_call_parser / reasoning_parser: a parser name, "auto" (from the chat template and vocabulary) or "none".
  static Result<std::unique_ptr<StructuredContext>> create(const Tokenizer& tokenizer, const std::string& chat_template,
                                                           std::vector<int32_t> eos_ids,
                                                           const std::string& tool_call_parser,
                                                           const std::string& reasoning_parser);

  tools::ToolParserKind tool_parser() const { return tool_parser_; }
  tools::ReasoningKind reasoning() const { return reasoning_; }
  // The compiled grammar for `key`, compiling it with `make` on a miss. Thread-safe.
  template <typename Make>
  Result<std::shared_ptr<const grammar::TokenGrammar>> get(const std::string& key, Make&& make) const;
  int64_t cache_misses() const;
  // The precomputed token-mask bytes of the cached grammars.
  int64_t cache_bytes() const;
  void set_cache_max_bytes(int64_t max_bytes);

  // Entries and mask bytes the cache keeps: the least recently used grammars go first (the newest always stays; a
  // single grammar is bounded by grammar::kMaxMaskBytes).
  static constexpr size_t kCacheCapacity = 64;
  static constexpr int64_t kCacheMaxBytes = int64_t{512} << 20;

 private:
  std::shared_ptr<const grammar::TokenVocab> vocab_;
  tools::ToolParserKind tool_parser_ = tools::ToolParserKind::kNone;
  tools::ReasoningKind reasoning_ = tools::ReasoningKind::kNone;
  mutable std::mutex mu_;
  mutable std::list<std::pair<std::string, std::shared_ptr<const grammar::TokenGrammar>>> lru_;
  mutable std::unordered_map<std::string, decltype(lru_)::iterator> index_;
  mutable int64_t misses_ = 0;
  mutable int64_t bytes_ = 0;
  int64_t max_bytes_ = kCacheMaxBytes;
};

// Reads the structured-output and tool fields of a completions or chat body into r (params.constraint and
// parse_mode). ctx.structured may be null (then only "text" response formats and no tools parsing).
MaybeError parse_structured(const OrderedJson& body, const ModelContext& ctx, GenerationRequest* r);

template <typename Make>
Result<std::shared_ptr<const grammar::TokenGrammar>> StructuredContext::get(const std::string& key, Make&& make) const {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = index_.find(key);
    if (it != index_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second);
      return it->second->second;
    }
  }
  Result<std::shared_ptr<const grammar::CompiledGrammar>> g = make();
  if (!g) return g.status();
  // Binding to the vocabulary precomputes every node's token mask (bounded; past a cap this is the request's 400).
  Result<std::shared_ptr<const grammar::TokenGrammar>> bound = grammar::TokenGrammar::create(*g, vocab_);
  if (!bound) return bound.status();
  std::shared_ptr<const grammar::TokenGrammar> tg = *bound;
  std::lock_guard<std::mutex> lock(mu_);
  ++misses_;
  if (index_.count(key)) return index_[key]->second;
  lru_.emplace_front(key, tg);
  index_[key] = lru_.begin();
  bytes_ += tg->mask_stats().num_bytes;
  while (lru_.size() > 1 && (lru_.size() > kCacheCapacity || bytes_ > max_bytes_)) {
    bytes_ -= lru_.back().second->mask_stats().num_bytes;
    index_.erase(lru_.back().first);
    lru_.pop_back();
  }
  return tg;
}

}  // namespace rl::server
