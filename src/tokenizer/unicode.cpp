#include "tokenizer/unicode.h"

namespace rl::tok {
namespace {

// Length of the well-formed UTF-8 sequence at s[i], or 0 when the bytes there are ill-formed.
// *bad_len is then the maximal subpart to replace by one U+FFFD (always >= 1).
size_t valid_sequence_len(std::string_view s, size_t i, size_t* bad_len) {
  auto b = static_cast<unsigned char>(s[i]);
  size_t need = 0;
  unsigned char lo = 0x80, hi = 0xBF;
  if (b < 0x80) return 1;
  if (b >= 0xC2 && b <= 0xDF) {
    need = 1;
  } else if (b >= 0xE0 && b <= 0xEF) {
    need = 2;
    if (b == 0xE0) lo = 0xA0;
    if (b == 0xED) hi = 0x9F;
  } else if (b >= 0xF0 && b <= 0xF4) {
    need = 3;
    if (b == 0xF0) lo = 0x90;
    if (b == 0xF4) hi = 0x8F;
  } else {
    *bad_len = 1;
    return 0;
  }
  size_t j = 1;
  for (; j <= need; ++j) {
    if (i + j >= s.size()) break;
    auto c = static_cast<unsigned char>(s[i + j]);
    if (c < lo || c > hi) break;
    lo = 0x80;
    hi = 0xBF;
  }
  if (j == need + 1) return need + 1;
  *bad_len = j;
  return 0;
}

}  // namespace

bool is_valid_utf8(std::string_view bytes) {
  size_t i = 0;
  while (i < bytes.size()) {
    if (static_cast<unsigned char>(bytes[i]) < 0x80) {
      ++i;
      continue;
    }
    size_t bad = 0;
    size_t n = valid_sequence_len(bytes, i, &bad);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

std::string utf8_lossy(std::string_view bytes) {
  if (is_valid_utf8(bytes)) return std::string(bytes);
  std::string out;
  out.reserve(bytes.size() + 16);
  size_t i = 0;
  while (i < bytes.size()) {
    size_t bad = 0;
    size_t n = valid_sequence_len(bytes, i, &bad);
    if (n > 0) {
      out.append(bytes.substr(i, n));
      i += n;
    } else {
      out.append(kReplacementChar);
      i += bad;
    }
  }
  return out;
}

char32_t next_code_point(std::string_view text, size_t* pos) {
  size_t i = *pos;
  auto b = static_cast<unsigned char>(text[i]);
  size_t n = utf8_char_len(b);
  if (i + n > text.size()) n = 1;
  char32_t cp;
  switch (n) {
    case 1:
      cp = b;
      break;
    case 2:
      cp = ((b & 0x1Fu) << 6) | (static_cast<unsigned char>(text[i + 1]) & 0x3Fu);
      break;
    case 3:
      cp = ((b & 0x0Fu) << 12) | ((static_cast<unsigned char>(text[i + 1]) & 0x3Fu) << 6) |
           (static_cast<unsigned char>(text[i + 2]) & 0x3Fu);
      break;
    default:
      cp = ((b & 0x07u) << 18) | ((static_cast<unsigned char>(text[i + 1]) & 0x3Fu) << 12) |
           ((static_cast<unsigned char>(text[i + 2]) & 0x3Fu) << 6) |
           (static_cast<unsigned char>(text[i + 3]) & 0x3Fu);
      break;
  }
  *pos = i + n;
  return cp;
}

void append_utf8(std::string* out, char32_t cp) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

bool is_white_space(char32_t cp) {
  if (cp <= 0x20) return cp == 0x20 || (cp >= 0x09 && cp <= 0x0D);
  switch (cp) {
    case 0x85:
    case 0xA0:
    case 0x1680:
    case 0x2028:
    case 0x2029:
    case 0x202F:
    case 0x205F:
    case 0x3000:
      return true;
    default:
      return cp >= 0x2000 && cp <= 0x200A;
  }
}

namespace {

// GPT-2's table: printable Latin-1 bytes map to themselves, the other 68 bytes to U+0100.. in byte
// order.
struct ByteTables {
  std::array<std::string, 256> to_unicode;
  std::array<int16_t, 512> from_unicode;
  ByteTables() {
    from_unicode.fill(-1);
    int n = 0;
    for (int b = 0; b < 256; ++b) {
      bool printable =
          (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      char32_t cp = printable ? static_cast<char32_t>(b) : static_cast<char32_t>(256 + n++);
      append_utf8(&to_unicode[b], cp);
      from_unicode[cp] = static_cast<int16_t>(b);
    }
  }
};

const ByteTables& byte_tables() {
  static const ByteTables tables;
  return tables;
}

}  // namespace

const std::array<std::string, 256>& byte_to_unicode() { return byte_tables().to_unicode; }

int unicode_to_byte(char32_t cp) { return cp < 512 ? byte_tables().from_unicode[cp] : -1; }

}  // namespace rl::tok
