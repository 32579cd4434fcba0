// Fuzz target: tokenizer.json loading, then encode and decode. Input: the tokenizer.json text, a NUL byte, then
// the text to encode (its ids, and a few ids taken from its bytes, are decoded back).
// fuzz-libs: rl_tokenizer
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const char* p = reinterpret_cast<const char*>(data);
  const void* nul = std::memchr(p, 0, size);
  const size_t json_len = nul ? static_cast<size_t>(static_cast<const char*>(nul) - p) : size;
  const std::string json(p, json_len);
  const std::string text = nul ? std::string(p + json_len + 1, size - json_len - 1) : std::string("Hello world");
  auto t = rl::Tokenizer::from_json(json, "");
  if (!t.is_ok()) return 0;
  const rl::Tokenizer& tok = **t;
  std::vector<int32_t> ids = tok.encode(text, true);
  (void)tok.decode(ids, false);
  (void)tok.decode(ids, true);
  // Arbitrary ids, including ones out of range.
  std::vector<int32_t> raw;
  for (size_t i = 0; i + 2 <= text.size() && raw.size() < 64; i += 2) {
    raw.push_back(static_cast<int32_t>((static_cast<uint8_t>(text[i]) << 8) | static_cast<uint8_t>(text[i + 1])) -
                  16);
  }
  (void)tok.decode(raw, false);
  (void)tok.decode_raw(raw, true);
  return 0;
}
