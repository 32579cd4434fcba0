// GBNF / EBNF grammars (llama.cpp's GBNF, which vLLM's guided_grammar also accepts) → CompiledGrammar.
//   rule-name ::= alternatives      (the start rule is `root`)
//   "literal" with \n \r \t \\ \" \xHH \uHHHH escapes, [class] / [^class] with ranges and the same escapes, `.`,
//   rule references, ( ... ), |, postfix * + ? {m} {m,} {m,n}, # comments to end of line.
// Left recursion fails with the rule's name (a top-down pushdown matcher cannot run it).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "grammar/grammar.h"

namespace rl::grammar {

inline constexpr size_t kMaxGrammarBytes = 65536;

Result<std::shared_ptr<const CompiledGrammar>> gbnf_grammar(std::string_view text);
// Exactly one of the choices (guided_choice).
Result<std::shared_ptr<const CompiledGrammar>> choice_grammar(const std::vector<std::string>& choices);

}  // namespace rl::grammar
