#include "tokenizer/pre_tokenizer.h"

#include <utf8proc.h>

#include <algorithm>
#include <functional>

#include "tokenizer/regex.h"
#include "tokenizer/unicode.h"
#include "tokenizer/limits.h"

namespace rl::tok {
namespace {

enum class Behavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

Result<Behavior> parse_behavior(const Json& j, const std::string& what, Behavior def) {
  auto it = j.find("behavior");
  if (it == j.end() || it->is_null()) return def;
  std::string b = it->is_string() ? it->get<std::string>() : std::string();
  if (b == "Removed") return Behavior::kRemoved;
  if (b == "Isolated") return Behavior::kIsolated;
  if (b == "MergedWithPrevious") return Behavior::kMergedWithPrevious;
  if (b == "MergedWithNext") return Behavior::kMergedWithNext;
  if (b == "Contiguous") return Behavior::kContiguous;
  return Status::error(what + ": unknown split behavior " + json_brief(*it));
}

// Splits `text` at the given match spans following the Rust tokenizers' SplitDelimiterBehavior;
// appends the non-empty pieces to out.
void split_by_matches(std::string_view text, const std::vector<Span>& spans, bool invert,
                      Behavior behavior, std::vector<std::string>* out) {
  struct Part {
    size_t start, end;
    bool is_match;
  };
  std::vector<Part> parts;
  size_t prev = 0;
  for (auto [s, e] : spans) {
    if (s > prev) parts.push_back({prev, s, invert});
    parts.push_back({s, e, !invert});
    prev = e;
  }
  if (prev < text.size()) parts.push_back({prev, text.size(), invert});
  std::vector<Part> merged;
  switch (behavior) {
    case Behavior::kRemoved:
      for (const Part& p : parts) {
        if (!p.is_match) merged.push_back(p);
      }
      break;
    case Behavior::kIsolated:
      merged.swap(parts);
      break;
    case Behavior::kMergedWithPrevious: {
      bool previous_match = false;
      for (const Part& p : parts) {
        if (p.is_match && !previous_match && !merged.empty()) {
          merged.back().end = p.end;
        } else {
          merged.push_back(p);
        }
        previous_match = p.is_match;
      }
      break;
    }
    case Behavior::kMergedWithNext: {
      bool previous_match = false;
      for (size_t i = parts.size(); i-- > 0;) {
        const Part& p = parts[i];
        if (p.is_match && !previous_match && !merged.empty()) {
          merged.back().start = p.start;
        } else {
          merged.push_back(p);
        }
        previous_match = p.is_match;
      }
      std::reverse(merged.begin(), merged.end());
      break;
    }
    case Behavior::kContiguous: {
      bool previous_match = false;
      for (const Part& p : parts) {
        if (p.is_match == previous_match && !merged.empty()) {
          merged.back().end = p.end;
        } else {
          merged.push_back(p);
        }
        previous_match = p.is_match;
      }
      break;
    }
  }
  for (const Part& p : merged) {
    if (p.end > p.start) out->emplace_back(text.substr(p.start, p.end - p.start));
  }
}

// Applies `fn(piece, out)` to every piece.
void for_each_piece(std::vector<std::string>* pieces,
                    const std::function<void(const std::string&, std::vector<std::string>*)>& fn) {
  std::vector<std::string> out;
  out.reserve(pieces->size());
  for (const std::string& p : *pieces) fn(p, &out);
  pieces->swap(out);
}

// Spans of single code points that satisfy pred.
template <typename Pred>
void char_spans(std::string_view text, Pred pred, std::vector<Span>* spans) {
  size_t pos = 0;
  while (pos < text.size()) {
    size_t start = pos;
    char32_t cp = next_code_point(text, &pos);
    if (pred(cp)) spans->emplace_back(start, pos);
  }
}

class SplitPreTokenizer final : public PreTokenizer {
 public:
  SplitPreTokenizer(Pattern pattern, Behavior behavior, bool invert)
      : pattern_(std::move(pattern)), behavior_(behavior), invert_(invert) {}
  void pre_tokenize(std::vector<std::string>* pieces, size_t) const override {
    for_each_piece(pieces, [&](const std::string& p, std::vector<std::string>* out) {
      std::vector<Span> spans;
      pattern_.find_all(p, &spans);
      split_by_matches(p, spans, invert_, behavior_, out);
    });
  }

 private:
  Pattern pattern_;
  Behavior behavior_;
  bool invert_;
};

class ByteLevelPreTokenizer final : public PreTokenizer {
 public:
  ByteLevelPreTokenizer(bool add_prefix_space, std::shared_ptr<const Regex> regex)
      : add_prefix_space_(add_prefix_space), regex_(std::move(regex)) {}
  void pre_tokenize(std::vector<std::string>* pieces, size_t) const override {
    const auto& table = byte_to_unicode();
    for_each_piece(pieces, [&](const std::string& p, std::vector<std::string>* out) {
      std::string text = add_prefix_space_ && (p.empty() || p[0] != ' ') ? " " + p : p;
      std::vector<std::string> split;
      if (regex_) {
        std::vector<Span> spans;
        regex_->find_all(text, &spans);
        split_by_matches(text, spans, false, Behavior::kIsolated, &split);
      } else {
        split.push_back(std::move(text));
      }
      for (const std::string& s : split) {
        std::string mapped;
        mapped.reserve(s.size() * 2);
        for (char c : s) mapped += table[static_cast<unsigned char>(c)];
        out->push_back(std::move(mapped));
      }
    });
  }

 private:
  bool add_prefix_space_;
  std::shared_ptr<const Regex> regex_;  // the GPT-2 regex when use_regex, else null
};

enum class PrependScheme { kAlways, kFirst, kNever };

class MetaspacePreTokenizer final : public PreTokenizer {
 public:
  MetaspacePreTokenizer(std::string replacement, PrependScheme scheme, bool split)
      : replacement_(std::move(replacement)), scheme_(scheme), split_(split) {}
  void pre_tokenize(std::vector<std::string>* pieces, size_t section_index) const override {
    size_t index = 0;
    for_each_piece(pieces, [&](const std::string& p, std::vector<std::string>* out) {
      std::string s = Pattern::literal(" ").replace_all(p, replacement_);
      bool first = section_index == 0 && index++ == 0;
      bool prepend =
          scheme_ == PrependScheme::kAlways || (scheme_ == PrependScheme::kFirst && first);
      if (prepend && s.compare(0, replacement_.size(), replacement_) != 0) s = replacement_ + s;
      if (!split_) {
        out->push_back(std::move(s));
        return;
      }
      std::vector<Span> spans;
      Pattern::literal(replacement_).find_all(s, &spans);
      split_by_matches(s, spans, false, Behavior::kMergedWithNext, out);
    });
  }

 private:
  std::string replacement_;
  PrependScheme scheme_;
  bool split_;
};

class CharClassPreTokenizer final : public PreTokenizer {
 public:
  CharClassPreTokenizer(std::function<bool(char32_t)> pred, Behavior behavior)
      : pred_(std::move(pred)), behavior_(behavior) {}
  void pre_tokenize(std::vector<std::string>* pieces, size_t) const override {
    for_each_piece(pieces, [&](const std::string& p, std::vector<std::string>* out) {
      std::vector<Span> spans;
      char_spans(p, pred_, &spans);
      split_by_matches(p, spans, false, behavior_, out);
    });
  }

 private:
  std::function<bool(char32_t)> pred_;
  Behavior behavior_;
};

class RegexPreTokenizer final : public PreTokenizer {
 public:
  RegexPreTokenizer(std::shared_ptr<const Regex> regex, bool invert, Behavior behavior)
      : regex_(std::move(regex)), invert_(invert), behavior_(behavior) {}
  void pre_tokenize(std::vector<std::string>* pieces, size_t) const override {
    for_each_piece(pieces, [&](const std::string& p, std::vector<std::string>* out) {
      std::vector<Span> spans;
      regex_->find_all(p, &spans);
      split_by_matches(p, spans, invert_, behavior_, out);
    });
  }

 private:
  std::shared_ptr<const Regex> regex_;
  bool invert_;
  Behavior behavior_;
};

class SequencePreTokenizer final : public PreTokenizer {
 public:
  explicit SequencePreTokenizer(std::vector<std::unique_ptr<PreTokenizer>> parts)
      : parts_(std::move(parts)) {}
  void pre_tokenize(std::vector<std::string>* pieces, size_t section_index) const override {
    for (const auto& p : parts_) p->pre_tokenize(pieces, section_index);
  }

 private:
  std::vector<std::unique_ptr<PreTokenizer>> parts_;
};

bool is_numeric(char32_t cp) {
  auto cat = utf8proc_category(static_cast<utf8proc_int32_t>(cp));
  return cat == UTF8PROC_CATEGORY_ND || cat == UTF8PROC_CATEGORY_NL || cat == UTF8PROC_CATEGORY_NO;
}

bool is_punctuation(char32_t cp) {
  if (cp < 0x80)
    return (cp >= '!' && cp <= '/') || (cp >= ':' && cp <= '@') || (cp >= '[' && cp <= '`') ||
           (cp >= '{' && cp <= '~');
  auto cat = utf8proc_category(static_cast<utf8proc_int32_t>(cp));
  return cat >= UTF8PROC_CATEGORY_PC && cat <= UTF8PROC_CATEGORY_PO;
}

constexpr const char* kGpt2Regex =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

}  // namespace

Result<std::unique_ptr<PreTokenizer>> parse_pre_tokenizer(const Json& j, const std::string& what, int depth) {
  using Ptr = std::unique_ptr<PreTokenizer>;
  if (j.is_null()) return Ptr();
  if (!j.is_object() || !j.contains("type") || !j["type"].is_string()) {
    return Status::error(what + ": must be an object with a string \"type\"");
  }
  std::string type = j["type"].get<std::string>();
  auto flag = [&](const char* key, bool def) {
    auto it = j.find(key);
    return it != j.end() && it->is_boolean() ? it->get<bool>() : def;
  };
  if (type == "Split") {
    if (!j.contains("pattern")) return Status::error(what + ": Split needs a \"pattern\"");
    RL_ASSIGN_OR_RETURN(Pattern pattern, Pattern::from_json(j["pattern"], what + ": Split"));
    RL_ASSIGN_OR_RETURN(Behavior behavior,
                        parse_behavior(j, what + ": Split", Behavior::kIsolated));
    return Ptr(new SplitPreTokenizer(std::move(pattern), behavior, flag("invert", false)));
  }
  if (type == "ByteLevel") {
    std::shared_ptr<const Regex> regex;
    if (flag("use_regex", true)) {
      auto re = Regex::compile(kGpt2Regex);
      if (!re) return Status::error(what + ": ByteLevel: " + re.message());
      regex = std::move(re).value();
    }
    return Ptr(new ByteLevelPreTokenizer(flag("add_prefix_space", false), std::move(regex)));
  }
  if (type == "Metaspace") {
    std::string replacement = "\xE2\x96\x81";
    if (auto it = j.find("replacement"); it != j.end()) {
      if (!it->is_string() || it->get<std::string>().empty()) {
        return Status::error(what + ": Metaspace \"replacement\" must be a non-empty string");
      }
      replacement = it->get<std::string>();
    }
    PrependScheme scheme =
        flag("add_prefix_space", true) ? PrependScheme::kAlways : PrependScheme::kNever;
    if (auto it = j.find("prepend_scheme"); it != j.end() && !it->is_null()) {
      std::string s = it->is_string() ? it->get<std::string>() : "";
      if (s == "always")
        scheme = PrependScheme::kAlways;
      else if (s == "first")
        scheme = PrependScheme::kFirst;
      else if (s == "never")
        scheme = PrependScheme::kNever;
      else
        return Status::error(what + ": Metaspace: unknown prepend_scheme " + json_brief(*it));
    }
    return Ptr(new MetaspacePreTokenizer(replacement, scheme, flag("split", true)));
  }
  if (type == "Digits") {
    Behavior b = flag("individual_digits", false) ? Behavior::kIsolated : Behavior::kContiguous;
    return Ptr(new CharClassPreTokenizer(is_numeric, b));
  }
  if (type == "Punctuation") {
    RL_ASSIGN_OR_RETURN(Behavior behavior,
                        parse_behavior(j, what + ": Punctuation", Behavior::kIsolated));
    return Ptr(new CharClassPreTokenizer(is_punctuation, behavior));
  }
  if (type == "WhitespaceSplit") {
    return Ptr(new CharClassPreTokenizer([](char32_t cp) { return is_white_space(cp); },
                                         Behavior::kRemoved));
  }
  if (type == "Whitespace") {
    auto re = Regex::compile("\\w+|[^\\w\\s]+");
    if (!re) return Status::error(what + ": Whitespace: " + re.message());
    return Ptr(new RegexPreTokenizer(std::move(re).value(), true, Behavior::kRemoved));
  }
  if (type == "Sequence") {
    if (depth >= kMaxComponentNesting) {
      return Status::error(what + ": Sequence nested deeper than " + std::to_string(kMaxComponentNesting) +
                           " levels");
    }
    auto it = j.find("pretokenizers");
    if (it == j.end() || !it->is_array())
      return Status::error(what + ": Sequence needs an array \"pretokenizers\"");
    std::vector<Ptr> parts;
    for (size_t i = 0; i < it->size(); ++i) {
      RL_ASSIGN_OR_RETURN(Ptr part, parse_pre_tokenizer((*it)[i], what + ".pretokenizers[" +
                                                                      std::to_string(i) + "]", depth + 1));
      if (part) parts.push_back(std::move(part));
    }
    return Ptr(new SequencePreTokenizer(std::move(parts)));
  }
  return Status::error(what + " type \"" + type + "\" is not supported");
}

}  // namespace rl::tok
