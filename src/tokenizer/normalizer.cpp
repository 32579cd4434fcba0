#include "tokenizer/normalizer.h"

#include <utf8proc.h>

#include <cstdlib>
#include <vector>

#include "tokenizer/regex.h"
#include "tokenizer/unicode.h"
#include "tokenizer/limits.h"

namespace rl::tok {
namespace {

bool is_ascii(std::string_view s) {
  for (char c : s) {
    if (static_cast<unsigned char>(c) >= 0x80) return false;
  }
  return true;
}

class UnicodeNormalizer final : public Normalizer {
 public:
  UnicodeNormalizer(int options, bool ascii_is_identity)
      : options_(options), ascii_is_identity_(ascii_is_identity) {}
  std::string normalize(std::string_view text) const override {
    if (ascii_is_identity_ && is_ascii(text)) return std::string(text);
    utf8proc_uint8_t* dst = nullptr;
    utf8proc_ssize_t n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()),
                                      static_cast<utf8proc_ssize_t>(text.size()), &dst,
                                      static_cast<utf8proc_option_t>(options_));
    if (n < 0) return std::string(text);  // only on invalid UTF-8, which never reaches a normalizer
    std::string out(reinterpret_cast<char*>(dst), static_cast<size_t>(n));
    std::free(dst);
    return out;
  }

 private:
  int options_;
  bool ascii_is_identity_;
};

class ReplaceNormalizer final : public Normalizer {
 public:
  ReplaceNormalizer(Pattern pattern, std::string content)
      : pattern_(std::move(pattern)), content_(std::move(content)) {}
  std::string normalize(std::string_view text) const override {
    return pattern_.replace_all(text, content_);
  }

 private:
  Pattern pattern_;
  std::string content_;
};

class PrependNormalizer final : public Normalizer {
 public:
  explicit PrependNormalizer(std::string prefix) : prefix_(std::move(prefix)) {}
  std::string normalize(std::string_view text) const override {
    if (text.empty()) return {};
    return prefix_ + std::string(text);
  }

 private:
  std::string prefix_;
};

// Per-code-point lowercase mapping (utf8proc), plus U+0130 → "i̇" as full case mapping does.
class LowercaseNormalizer final : public Normalizer {
 public:
  std::string normalize(std::string_view text) const override {
    std::string out;
    out.reserve(text.size());
    size_t pos = 0;
    while (pos < text.size()) {
      char32_t cp = next_code_point(text, &pos);
      if (cp == 0x130) {
        out += "i\xCC\x87";
        continue;
      }
      append_utf8(&out, static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(cp))));
    }
    return out;
  }
};

class StripNormalizer final : public Normalizer {
 public:
  StripNormalizer(bool left, bool right) : left_(left), right_(right) {}
  std::string normalize(std::string_view text) const override {
    size_t begin = 0, end = text.size();
    if (left_) {
      while (begin < end) {
        size_t p = begin;
        if (!is_white_space(next_code_point(text, &p))) break;
        begin = p;
      }
    }
    if (right_) {
      while (end > begin) {
        size_t start = end - 1;
        while (start > begin && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) --start;
        size_t p = start;
        if (!is_white_space(next_code_point(text, &p))) break;
        end = start;
      }
    }
    return std::string(text.substr(begin, end - begin));
  }

 private:
  bool left_, right_;
};

class SequenceNormalizer final : public Normalizer {
 public:
  explicit SequenceNormalizer(std::vector<std::unique_ptr<Normalizer>> parts)
      : parts_(std::move(parts)) {}
  std::string normalize(std::string_view text) const override {
    std::string s(text);
    for (const auto& p : parts_) s = p->normalize(s);
    return s;
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> parts_;
};

}  // namespace

Result<std::unique_ptr<Normalizer>> parse_normalizer(const Json& j, const std::string& what, int depth) {
  if (j.is_null()) return std::unique_ptr<Normalizer>();
  if (!j.is_object() || !j.contains("type") || !j["type"].is_string()) {
    return Status::error(what + ": must be an object with a string \"type\"");
  }
  std::string type = j["type"].get<std::string>();
  auto str = [&](const char* key) -> std::string {
    auto it = j.find(key);
    return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  auto flag = [&](const char* key, bool def) {
    auto it = j.find(key);
    return it != j.end() && it->is_boolean() ? it->get<bool>() : def;
  };
  if (type == "NFC")
    return std::unique_ptr<Normalizer>(
        new UnicodeNormalizer(UTF8PROC_STABLE | UTF8PROC_COMPOSE, true));
  if (type == "NFD")
    return std::unique_ptr<Normalizer>(
        new UnicodeNormalizer(UTF8PROC_STABLE | UTF8PROC_DECOMPOSE, true));
  if (type == "NFKC") {
    return std::unique_ptr<Normalizer>(
        new UnicodeNormalizer(UTF8PROC_STABLE | UTF8PROC_COMPOSE | UTF8PROC_COMPAT, true));
  }
  if (type == "NFKD") {
    return std::unique_ptr<Normalizer>(
        new UnicodeNormalizer(UTF8PROC_STABLE | UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT, true));
  }
  if (type == "Lowercase") return std::unique_ptr<Normalizer>(new LowercaseNormalizer());
  if (type == "Strip")
    return std::unique_ptr<Normalizer>(
        new StripNormalizer(flag("strip_left", true), flag("strip_right", true)));
  if (type == "Prepend") {
    if (!j.contains("prepend") || !j["prepend"].is_string())
      return Status::error(what + ": Prepend needs a string \"prepend\"");
    return std::unique_ptr<Normalizer>(new PrependNormalizer(str("prepend")));
  }
  if (type == "Replace") {
    if (!j.contains("pattern")) return Status::error(what + ": Replace needs a \"pattern\"");
    RL_ASSIGN_OR_RETURN(Pattern pattern, Pattern::from_json(j["pattern"], what + ": Replace"));
    return std::unique_ptr<Normalizer>(new ReplaceNormalizer(std::move(pattern), str("content")));
  }
  if (type == "Sequence") {
    if (depth >= kMaxComponentNesting) {
      return Status::error(what + ": Sequence nested deeper than " + std::to_string(kMaxComponentNesting) +
                           " levels");
    }
    auto it = j.find("normalizers");
    if (it == j.end() || !it->is_array())
      return Status::error(what + ": Sequence needs an array \"normalizers\"");
    std::vector<std::unique_ptr<Normalizer>> parts;
    for (size_t i = 0; i < it->size(); ++i) {
      RL_ASSIGN_OR_RETURN(
          auto part, parse_normalizer((*it)[i], what + ".normalizers[" + std::to_string(i) + "]", depth + 1));
      if (part) parts.push_back(std::move(part));
    }
    return std::unique_ptr<Normalizer>(new SequenceNormalizer(std::move(parts)));
  }
  return Status::error(what + " type \"" + type + "\" is not supported");
}

}  // namespace rl::tok
