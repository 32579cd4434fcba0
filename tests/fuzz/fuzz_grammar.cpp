// fuzz-libs: rl_grammar
// Grammar text (JSON schema, regex or GBNF: the first byte picks) → compiled automaton → precomputed token masks on
// a small vocabulary, then a few matcher steps, each mask checked against every token tried on its own (a
// differential check of the precompute, the uncertain-token walk and the caps). Untrusted input end to end.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "grammar/gbnf.h"
#include "grammar/json_schema.h"
#include "grammar/matcher.h"
#include "grammar/regex.h"

namespace {

using namespace rl;
using namespace rl::grammar;

std::shared_ptr<const TokenVocab> vocab() {
  static const std::shared_ptr<const TokenVocab> v = [] {
    std::vector<std::string> b;
    for (int i = 0; i < 256; ++i) b.push_back(std::string(1, static_cast<char>(i)));
    for (const char* s : {"\"", "\",", "\"}", "\": ", "{\"", "true", "false", "null", "12", "ab", "\\n", "é", "}]",
                          "],", "<tool_call>", " ", "  ", "\n", "0.5", "-1", "abc", "\\u00", "[\"", "\"]"})
      b.push_back(s);
    b.push_back("");  // EOS
    return TokenVocab::from_bytes(b, {static_cast<int32_t>(b.size() - 1)});
  }();
  return v;
}

// Every token tried on its own from the matcher's state.
std::vector<uint32_t> brute_mask(const GrammarMatcher& m) {
  const TokenVocab& v = m.token_grammar().vocab();
  std::vector<uint32_t> w(v.mask_words(), 0);
  StackArena scratch(&m.arena());
  MatchState cur, next;
  for (int32_t t = 0; t < v.vocab_size(); ++t) {
    bool ok = !v.bytes(t).empty();
    cur = m.state();
    for (char c : v.bytes(t)) {
      if (!ok || cur.stacks.empty()) {
        ok = false;
        break;
      }
      advance(&scratch, m.token_grammar().grammar(), cur, static_cast<uint8_t>(c), &next);
      std::swap(cur, next);
      ok = cur.consumed;
    }
    if (ok) w[t >> 5] |= 1u << (t & 31);
    scratch.clear();
  }
  if (m.can_end())
    for (int32_t e : v.eos_ids()) w[e >> 5] |= 1u << (e & 31);
  return w;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1 || size > 8192) return 0;
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  Result<std::shared_ptr<const CompiledGrammar>> g = Status::error("none");
  switch (data[0] % 3) {
    case 0: {
      OrderedJson schema = OrderedJson::parse(text, nullptr, false);
      if (schema.is_discarded()) return 0;
      g = json_schema_grammar(schema);
      break;
    }
    case 1:
      g = regex_grammar(text);
      break;
    default:
      g = gbnf_grammar(text);
      break;
  }
  if (!g) return 0;
  MaskLimits limits;  // smaller than the server's, so one input stays fast
  limits.max_steps = int64_t{1} << 22;
  limits.max_table_bytes = int64_t{16} << 20;
  limits.max_bytes = int64_t{16} << 20;
  auto tg = TokenGrammar::create(*g, vocab(), limits);
  if (!tg) return 0;
  GrammarMatcher m(*tg);
  std::vector<uint32_t> mask(vocab()->mask_words());
  for (int step = 0; step < 12 && !m.terminated(); ++step) {
    m.fill_mask(mask.data());
    if (mask != brute_mask(m)) std::abort();
    std::vector<int32_t> allowed;
    for (int32_t t = 0; t < vocab()->vocab_size(); ++t)
      if ((mask[t >> 5] >> (t & 31)) & 1u) allowed.push_back(t);
    if (allowed.empty()) break;
    const int32_t t = allowed[(static_cast<size_t>(step) * 7919 + size) % allowed.size()];
    if (!m.accept_token(t)) std::abort();
  }
  return 0;
}
