// UTF-8 helpers shared by the tokenizer: lossy decoding (invalid bytes → U+FFFD, WHATWG "maximal
// subpart" rule, the same as Rust's String::from_utf8_lossy and JS TextDecoder), code point
// iteration, the GPT-2 byte ↔ unicode table used by ByteLevel components, and the Unicode
// White_Space set.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace rl::tok {

inline constexpr std::string_view kReplacementChar = "\xEF\xBF\xBD";  // U+FFFD

// Returns the text with every ill-formed subsequence replaced by U+FFFD; valid input comes back
// unchanged.
std::string utf8_lossy(std::string_view bytes);
bool is_valid_utf8(std::string_view bytes);

// Length in bytes of the UTF-8 character starting with `lead` (1 for a stray continuation byte).
inline size_t utf8_char_len(unsigned char lead) {
  if (lead < 0x80) return 1;
  if (lead >= 0xF0) return 4;
  if (lead >= 0xE0) return 3;
  if (lead >= 0xC0) return 2;
  return 1;
}

// Decodes the code point at text[pos] of VALID UTF-8 and advances pos past it.
char32_t next_code_point(std::string_view text, size_t* pos);
void append_utf8(std::string* out, char32_t cp);

// Unicode White_Space (the 25 code points of PropList.txt).
bool is_white_space(char32_t cp);

// GPT-2 byte-level alphabet: byte b ↔ a printable code point (as UTF-8).
const std::array<std::string, 256>& byte_to_unicode();
// The byte for a byte-level code point, or -1 when cp is not in the alphabet.
int unicode_to_byte(char32_t cp);

}  // namespace rl::tok
