#include "tokenizer/decoder.h"

#include "tokenizer/regex.h"
#include "tokenizer/unicode.h"
#include "tokenizer/limits.h"

namespace rl::tok {
namespace {

class ByteLevelDecoder final : public Decoder {
 public:
  // Runs of non-added tokens become bytes (the GPT-2 table inverted) decoded as lossy UTF-8.
  void decode_chain(std::vector<DecodeToken>* tokens) const override {
    std::vector<DecodeToken> out;
    std::string bytes;
    bool open = false;
    auto close = [&] {
      if (open) out.push_back({utf8_lossy(bytes), false});
      bytes.clear();
      open = false;
    };
    for (DecodeToken& t : *tokens) {
      if (t.added) {
        close();
        out.push_back(std::move(t));
        continue;
      }
      open = true;
      size_t pos = 0;
      while (pos < t.text.size()) {
        size_t start = pos;
        int b = unicode_to_byte(next_code_point(t.text, &pos));
        if (b >= 0) {
          bytes.push_back(static_cast<char>(b));
        } else {
          bytes.append(t.text, start, pos - start);
        }
      }
    }
    close();
    tokens->swap(out);
  }
};

class MetaspaceDecoder final : public Decoder {
 public:
  MetaspaceDecoder(std::string replacement, bool strip_first)
      : replacement_(std::move(replacement)), strip_first_(strip_first) {}
  void decode_chain(std::vector<DecodeToken>* tokens) const override {
    Pattern p = Pattern::literal(replacement_);
    for (size_t i = 0; i < tokens->size(); ++i) {
      std::string s = p.replace_all((*tokens)[i].text, " ");
      if (i == 0 && strip_first_ && !s.empty() && s[0] == ' ') s.erase(0, 1);
      (*tokens)[i].text = std::move(s);
    }
  }

 private:
  std::string replacement_;
  bool strip_first_;
};

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

class ByteFallbackDecoder final : public Decoder {
 public:
  // Consecutive "<0xXX>" tokens are joined into bytes and decoded as lossy UTF-8.
  void decode_chain(std::vector<DecodeToken>* tokens) const override {
    std::vector<DecodeToken> out;
    std::string bytes;
    auto flush = [&] {
      if (!bytes.empty()) out.push_back({utf8_lossy(bytes), false});
      bytes.clear();
    };
    for (DecodeToken& t : *tokens) {
      const std::string& s = t.text;
      if (s.size() == 6 && s.compare(0, 3, "<0x") == 0 && s[5] == '>' && hex_value(s[3]) >= 0 &&
          hex_value(s[4]) >= 0) {
        bytes.push_back(static_cast<char>(hex_value(s[3]) * 16 + hex_value(s[4])));
        continue;
      }
      flush();
      out.push_back(std::move(t));
    }
    flush();
    tokens->swap(out);
  }
};

class FuseDecoder final : public Decoder {
 public:
  void decode_chain(std::vector<DecodeToken>* tokens) const override {
    std::string all;
    for (const DecodeToken& t : *tokens) all += t.text;
    tokens->clear();
    tokens->push_back({std::move(all), false});
  }
};

class StripDecoder final : public Decoder {
 public:
  StripDecoder(std::string content, size_t start, size_t stop)
      : content_(std::move(content)), start_(start), stop_(stop) {}
  void decode_chain(std::vector<DecodeToken>* tokens) const override {
    if (content_.empty()) return;
    for (DecodeToken& t : *tokens) {
      std::string_view s = t.text;
      for (size_t i = 0; i < start_ && s.substr(0, content_.size()) == content_; ++i)
        s.remove_prefix(content_.size());
      for (size_t i = 0; i < stop_ && s.size() >= content_.size() &&
                         s.substr(s.size() - content_.size()) == content_;
           ++i) {
        s.remove_suffix(content_.size());
      }
      t.text = std::string(s);
    }
  }

 private:
  std::string content_;
  size_t start_, stop_;
};

class ReplaceDecoder final : public Decoder {
 public:
  ReplaceDecoder(Pattern pattern, std::string content)
      : pattern_(std::move(pattern)), content_(std::move(content)) {}
  void decode_chain(std::vector<DecodeToken>* tokens) const override {
    for (DecodeToken& t : *tokens) t.text = pattern_.replace_all(t.text, content_);
  }

 private:
  Pattern pattern_;
  std::string content_;
};

class SequenceDecoder final : public Decoder {
 public:
  explicit SequenceDecoder(std::vector<std::unique_ptr<Decoder>> parts)
      : parts_(std::move(parts)) {}
  void decode_chain(std::vector<DecodeToken>* tokens) const override {
    for (const auto& p : parts_) p->decode_chain(tokens);
  }

 private:
  std::vector<std::unique_ptr<Decoder>> parts_;
};

}  // namespace

Result<std::unique_ptr<Decoder>> parse_decoder(const Json& j, const std::string& what, int depth) {
  using Ptr = std::unique_ptr<Decoder>;
  if (j.is_null()) return Ptr();
  if (!j.is_object() || !j.contains("type") || !j["type"].is_string()) {
    return Status::error(what + ": must be an object with a string \"type\"");
  }
  std::string type = j["type"].get<std::string>();
  auto str = [&](const char* key, std::string def) -> std::string {
    auto it = j.find(key);
    return it != j.end() && it->is_string() ? it->get<std::string>() : def;
  };
  if (type == "ByteLevel") return Ptr(new ByteLevelDecoder());
  if (type == "ByteFallback") return Ptr(new ByteFallbackDecoder());
  if (type == "Fuse") return Ptr(new FuseDecoder());
  if (type == "Metaspace") {
    bool strip_first = true;
    if (auto it = j.find("add_prefix_space"); it != j.end() && it->is_boolean())
      strip_first = it->get<bool>();
    if (auto it = j.find("prepend_scheme"); it != j.end() && it->is_string())
      strip_first = it->get<std::string>() != "never";
    std::string replacement = str("replacement", "\xE2\x96\x81");
    if (replacement.empty())
      return Status::error(what + ": Metaspace \"replacement\" must not be empty");
    return Ptr(new MetaspaceDecoder(replacement, strip_first));
  }
  if (type == "Strip") {
    auto count = [&](const char* key) -> int64_t {
      auto it = j.find(key);
      return it != j.end() && it->is_number_integer() ? it->get<int64_t>() : 0;
    };
    if (count("start") < 0 || count("stop") < 0)
      return Status::error(what + ": Strip start/stop must be >= 0");
    return Ptr(new StripDecoder(str("content", " "), static_cast<size_t>(count("start")),
                                static_cast<size_t>(count("stop"))));
  }
  if (type == "Replace") {
    if (!j.contains("pattern")) return Status::error(what + ": Replace needs a \"pattern\"");
    RL_ASSIGN_OR_RETURN(Pattern pattern, Pattern::from_json(j["pattern"], what + ": Replace"));
    return Ptr(new ReplaceDecoder(std::move(pattern), str("content", "")));
  }
  if (type == "Sequence") {
    if (depth >= kMaxComponentNesting) {
      return Status::error(what + ": Sequence nested deeper than " + std::to_string(kMaxComponentNesting) +
                           " levels");
    }
    auto it = j.find("decoders");
    if (it == j.end() || !it->is_array())
      return Status::error(what + ": Sequence needs an array \"decoders\"");
    std::vector<Ptr> parts;
    for (size_t i = 0; i < it->size(); ++i) {
      RL_ASSIGN_OR_RETURN(Ptr part,
                          parse_decoder((*it)[i], what + ".decoders[" + std::to_string(i) + "]", depth + 1));
      if (part) parts.push_back(std::move(part));
    }
    return Ptr(new SequenceDecoder(std::move(parts)));
  }
  return Status::error(what + " type \"" + type + "\" is not supported");
}

std::string clean_up_tokenization(std::string_view text) {
  static const std::pair<std::string_view, std::string_view> kRules[] = {
      {" .", "."},     {" ?", "?"},   {" !", "!"},   {" ,", ","},     {" ' ", "'"},
      {" n't", "n't"}, {" 'm", "'m"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}};
  std::string s(text);
  if (s.find(' ') == std::string::npos) return s;
  for (const auto& [from, to] : kRules) s = Pattern::literal(std::string(from)).replace_all(s, to);
  return s;
}

}  // namespace rl::tok
