// Attribute and item access, slicing, and the Python methods of str, dict and list that templates call
// ('x'.strip('\n'), d.items(), ...). jinja2 looks an attribute up as a Python attribute first (so d.items is the
// method even when d has an "items" key) and a subscript as an item first.
#include <algorithm>
#include <set>
#include <string>

#include "chat/builtins.h"
#include "chat/interpreter.h"
#include "chat/template_error.h"

namespace rl::jinja {

namespace {

using K = Value::Kind;

const std::set<std::string>& string_methods() {
  static const std::set<std::string> kNames = {
      "strip",   "lstrip",     "rstrip", "split",   "rsplit",  "replace", "startswith", "endswith",
      "upper",   "lower",      "title",  "capitalize", "find", "rfind",   "count",   "join",
      "format",  "isdigit",    "isalpha", "isalnum", "isspace", "isupper", "islower", "splitlines",
      "removeprefix", "removesuffix", "index", "rindex"};
  return kNames;
}

const std::set<std::string>& dict_methods() {
  static const std::set<std::string> kNames = {"get", "items", "keys", "values"};
  return kNames;
}

// Decodes one UTF-8 code point at s[k]; returns its byte length.
size_t decode(const std::string& s, size_t k, uint32_t* cp) {
  unsigned char c = static_cast<unsigned char>(s[k]);
  size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 1;
  if (k + n > s.size()) n = 1;
  uint32_t v = n == 1 ? c : n == 2 ? (c & 0x1f) : n == 3 ? (c & 0x0f) : (c & 0x07);
  for (size_t d = 1; d < n; ++d) v = (v << 6) | (static_cast<unsigned char>(s[k + d]) & 0x3f);
  *cp = v;
  return n;
}

// Python's str.isspace() set.
bool is_py_space(uint32_t cp) {
  return (cp >= 0x09 && cp <= 0x0d) || (cp >= 0x1c && cp <= 0x20) || cp == 0x85 || cp == 0xa0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200a) || cp == 0x2028 || cp == 0x2029 || cp == 0x202f || cp == 0x205f ||
         cp == 0x3000;
}

std::string strip_impl(const std::string& s, const Value* chars, bool left, bool right, int line) {
  std::vector<uint32_t> set;
  bool whitespace = chars == nullptr || chars->is_none();
  if (!whitespace) {
    if (!chars->is_string()) fail(line, "strip arg must be None or str");
    for (size_t k = 0; k < chars->str().size();) {
      uint32_t cp;
      k += decode(chars->str(), k, &cp);
      set.push_back(cp);
    }
  }
  auto strip_cp = [&](uint32_t cp) {
    return whitespace ? is_py_space(cp) : std::find(set.begin(), set.end(), cp) != set.end();
  };
  std::vector<size_t> starts;
  std::vector<uint32_t> cps;
  for (size_t k = 0; k < s.size();) {
    uint32_t cp;
    starts.push_back(k);
    k += decode(s, k, &cp);
    cps.push_back(cp);
  }
  size_t b = 0, e = cps.size();
  if (left)
    while (b < e && strip_cp(cps[b])) ++b;
  if (right)
    while (e > b && strip_cp(cps[e - 1])) --e;
  size_t from = b < starts.size() ? starts[b] : s.size();
  size_t to = e < starts.size() ? starts[e] : s.size();
  return s.substr(from, to - from);
}

Value split_impl(const std::string& s, const Value* sep, const Value* maxsplit_v, bool from_right, int line) {
  int64_t maxsplit = maxsplit_v != nullptr && maxsplit_v->is_int() ? maxsplit_v->i : -1;
  Array out;
  if (sep == nullptr || sep->is_none()) {
    std::vector<std::pair<size_t, size_t>> words;  // [begin, end) byte ranges of runs of non-space
    size_t k = 0;
    while (k < s.size()) {
      uint32_t cp;
      size_t n = decode(s, k, &cp);
      if (is_py_space(cp)) {
        k += n;
        continue;
      }
      size_t b = k;
      if (words.size() >= kMaxValueItems) fail(line, "split(): more than " + std::to_string(kMaxValueItems) + " parts");
      while (k < s.size()) {
        n = decode(s, k, &cp);
        if (is_py_space(cp)) break;
        k += n;
      }
      words.emplace_back(b, k);
    }
    if (maxsplit < 0 || static_cast<size_t>(maxsplit) + 1 >= words.size()) {
      for (auto& w : words) out.push_back(Value::string(s.substr(w.first, w.second - w.first)));
    } else if (!from_right) {
      for (int64_t w = 0; w < maxsplit; ++w) out.push_back(Value::string(s.substr(words[w].first, words[w].second - words[w].first)));
      out.push_back(Value::string(s.substr(words[maxsplit].first)));
    } else {
      size_t keep = words.size() - static_cast<size_t>(maxsplit);
      out.push_back(Value::string(s.substr(0, words[keep - 1].second)));
      for (size_t w = keep; w < words.size(); ++w) out.push_back(Value::string(s.substr(words[w].first, words[w].second - words[w].first)));
    }
    return Value::array(std::move(out));
  }
  if (!sep->is_string()) fail(line, std::string("must be str or None, not ") + sep->type_name());
  const std::string& d = sep->str();
  if (d.empty()) fail(line, "empty separator");
  std::vector<std::string> parts;
  size_t pos = 0;
  while (true) {
    size_t hit = find_text(s, d, pos);
    if (hit == std::string::npos) break;
    parts.push_back(s.substr(pos, hit - pos));
    if (parts.size() > kMaxValueItems) fail(line, "split(): more than " + std::to_string(kMaxValueItems) + " parts");
    pos = hit + d.size();
  }
  parts.push_back(s.substr(pos));
  if (maxsplit >= 0 && parts.size() > static_cast<size_t>(maxsplit) + 1) {
    std::vector<std::string> merged;
    size_t n = static_cast<size_t>(maxsplit);
    if (!from_right) {
      merged.assign(parts.begin(), parts.begin() + static_cast<long>(n));
      std::string rest = parts[n];
      for (size_t k = n + 1; k < parts.size(); ++k) rest += d + parts[k];
      merged.push_back(rest);
    } else {
      size_t head = parts.size() - n;
      std::string rest = parts[0];
      for (size_t k = 1; k < head; ++k) rest += d + parts[k];
      merged.push_back(rest);
      merged.insert(merged.end(), parts.begin() + static_cast<long>(head), parts.end());
    }
    parts = std::move(merged);
  }
  for (auto& p : parts) out.push_back(Value::string(std::move(p)));
  return Value::array(std::move(out));
}

bool prefix_test(const std::string& s, const Value* arg, bool suffix, int line) {
  if (arg == nullptr) fail(line, std::string(suffix ? "endswith" : "startswith") + "() takes at least 1 argument");
  auto one = [&](const Value& p) {
    if (!p.is_string()) fail(line, std::string(suffix ? "endswith" : "startswith") + " first arg must be str or a tuple of str");
    const std::string& x = p.str();
    if (x.size() > s.size()) return false;
    return suffix ? s.compare(s.size() - x.size(), x.size(), x) == 0 : s.compare(0, x.size(), x) == 0;
  };
  if (arg->is_array()) {
    for (const Value& p : arg->arr())
      if (one(p)) return true;
    return false;
  }
  return one(*arg);
}

// str.format with {} / {0} / {name} fields (no format specs beyond the empty one).
std::string format_impl(const std::string& fmt, const CallArgs& args) {
  std::string out;
  size_t auto_index = 0;
  for (size_t k = 0; k < fmt.size(); ++k) {
    char c = fmt[k];
    if (c == '{' && k + 1 < fmt.size() && fmt[k + 1] == '{') {
      out.push_back('{');
      ++k;
    } else if (c == '}' && k + 1 < fmt.size() && fmt[k + 1] == '}') {
      out.push_back('}');
      ++k;
    } else if (c == '{') {
      size_t close = fmt.find('}', k);
      if (close == std::string::npos) fail(args.line, "format(): unmatched '{'");
      std::string field = fmt.substr(k + 1, close - k - 1);
      if (field.find(':') != std::string::npos || field.find('!') != std::string::npos) {
        fail(args.line, "format(): format specs are not supported");
      }
      const Value* v = nullptr;
      if (field.empty()) {
        v = auto_index < args.positional.size() ? &args.positional[auto_index] : nullptr;
        ++auto_index;
      } else if (std::all_of(field.begin(), field.end(), [](char d) { return d >= '0' && d <= '9'; })) {
        size_t idx = std::stoul(field);
        v = idx < args.positional.size() ? &args.positional[idx] : nullptr;
      } else {
        for (const auto& kv : args.keyword)
          if (kv.first == field) v = &kv.second;
      }
      if (v == nullptr) fail(args.line, "format(): no argument for field '{" + field + "}'");
      out += v->to_str();
      k = close;
    } else {
      out.push_back(c);
    }
  }
  return out;
}

template <typename Pred>
bool all_chars(const std::string& s, Pred pred) {
  if (s.empty()) return false;
  for (size_t k = 0; k < s.size();) {
    uint32_t cp;
    k += decode(s, k, &cp);
    if (!pred(cp)) return false;
  }
  return true;
}

Value call_string_method(Interpreter& interp, const std::string& s, const std::string& name, const CallArgs& args) {
  const int line = args.line;
  const Value* a0 = args.get(0, "");
  const Value* a1 = args.get(1, "");
  if (name == "strip") return Value::string(strip_impl(s, a0, true, true, line));
  if (name == "lstrip") return Value::string(strip_impl(s, a0, true, false, line));
  if (name == "rstrip") return Value::string(strip_impl(s, a0, false, true, line));
  if (name == "split" || name == "rsplit") {
    const Value* sep = args.get(0, "sep");
    const Value* maxsplit = args.get(1, "maxsplit");
    return split_impl(s, sep, maxsplit, name == "rsplit", line);
  }
  if (name == "splitlines") {
    Array out;
    size_t b = 0;
    for (size_t k = 0; k < s.size(); ++k) {
      if (s[k] == '\n' || s[k] == '\r') {
        out.push_back(Value::string(s.substr(b, k - b)));
        if (s[k] == '\r' && k + 1 < s.size() && s[k + 1] == '\n') ++k;
        b = k + 1;
      }
    }
    if (b < s.size()) out.push_back(Value::string(s.substr(b)));
    return Value::array(std::move(out));
  }
  if (name == "replace") {
    if (a0 == nullptr || a1 == nullptr || !a0->is_string() || !a1->is_string()) {
      fail(line, "replace() takes two string arguments");
    }
    const Value* count_v = args.get(2, "count");
    int64_t count = count_v != nullptr && count_v->is_int() ? count_v->i : -1;
    const std::string& from = a0->str();
    const std::string& to = a1->str();
    std::string out;
    if (from.empty()) {
      // Python inserts `to` between every character (and at both ends).
      auto chars = utf8_chars(s);
      int64_t done = 0;
      for (const auto& ch : chars) {
        if (count < 0 || done < count) {
          out += to;
          ++done;
        }
        out += ch;
      }
      if (count < 0 || done < count) out += to;
      interp.check_string_size(out.size(), line);
      return Value::string(std::move(out));
    }
    size_t pos = 0;
    int64_t done = 0;
    while (count < 0 || done < count) {
      size_t hit = find_text(s, from, pos);
      if (hit == std::string::npos) break;
      out.append(s, pos, hit - pos);
      out += to;
      interp.check_string_size(out.size(), line);
      pos = hit + from.size();
      ++done;
    }
    out.append(s, pos, std::string::npos);
    return Value::string(std::move(out));
  }
  if (name == "startswith") return Value::boolean(prefix_test(s, a0, false, line));
  if (name == "endswith") return Value::boolean(prefix_test(s, a0, true, line));
  if (name == "upper") return Value::string(apply_case(s, 'u'));
  if (name == "lower") return Value::string(apply_case(s, 'l'));
  if (name == "title") return Value::string(apply_case(s, 't'));
  if (name == "capitalize") return Value::string(apply_case(s, 'c'));
  if (name == "find" || name == "rfind" || name == "index" || name == "rindex" || name == "count") {
    if (a0 == nullptr || !a0->is_string()) fail(line, name + "() needs a string argument");
    const std::string& sub = a0->str();
    if (name == "count") {
      if (sub.empty()) return Value::integer(static_cast<int64_t>(utf8_length(s)) + 1);
      int64_t n = 0;
      for (size_t pos = find_text(s, sub); pos != std::string::npos; pos = find_text(s, sub, pos + sub.size())) {
        ++n;
      }
      return Value::integer(n);
    }
    size_t hit = (name == "find" || name == "index") ? find_text(s, sub) : rfind_text(s, sub);
    if (hit == std::string::npos) {
      if (name == "index" || name == "rindex") fail(line, "substring not found");
      return Value::integer(-1);
    }
    return Value::integer(static_cast<int64_t>(utf8_length(s.substr(0, hit))));
  }
  if (name == "join") {
    if (a0 == nullptr) fail(line, "join() takes exactly one argument");
    std::string out;
    bool first = true;
    for (const Value& v : iterate(*a0, line)) {
      if (!v.is_string()) fail(line, std::string("sequence item: expected str instance, ") + v.type_name() + " found");
      if (!first) out += s;
      out += v.str();
      first = false;
      interp.check_string_size(out.size(), line);
    }
    return Value::string(std::move(out));
  }
  if (name == "format") return Value::string(format_impl(s, args));
  if (name == "removeprefix" || name == "removesuffix") {
    if (a0 == nullptr || !a0->is_string()) fail(line, name + "() needs a string argument");
    bool suffix = name == "removesuffix";
    if (prefix_test(s, a0, suffix, line)) {
      return Value::string(suffix ? s.substr(0, s.size() - a0->str().size()) : s.substr(a0->str().size()));
    }
    return Value::string(s);
  }
  if (name == "isdigit") return Value::boolean(all_chars(s, [](uint32_t c) { return c >= '0' && c <= '9'; }));
  if (name == "isalpha") {
    return Value::boolean(all_chars(s, [](uint32_t c) { return (c | 0x20) >= 'a' && (c | 0x20) <= 'z'; }));
  }
  if (name == "isalnum") {
    return Value::boolean(
        all_chars(s, [](uint32_t c) { return ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') || (c >= '0' && c <= '9'); }));
  }
  if (name == "isspace") return Value::boolean(all_chars(s, is_py_space));
  if (name == "isupper" || name == "islower") {
    bool upper = name == "isupper";
    bool cased = false;
    for (char c : s) {
      if (c >= 'a' && c <= 'z') {
        if (upper) return Value::boolean(false);
        cased = true;
      } else if (c >= 'A' && c <= 'Z') {
        if (!upper) return Value::boolean(false);
        cased = true;
      }
    }
    return Value::boolean(cased);
  }
  fail(line, "unknown method '" + name + "' of str");
}

Value call_dict_method(const Value& obj, const std::string& name, const CallArgs& args) {
  const Object& o = obj.attrs();
  if (name == "get") {
    const Value* key = args.get(0, "key");
    if (key == nullptr) fail(args.line, "get() takes at least 1 argument");
    const Value* found = key->is_string() ? o.find(key->str()) : nullptr;
    if (found != nullptr) return *found;
    const Value* dflt = args.get(1, "default");
    return dflt != nullptr ? *dflt : Value::none();
  }
  Array out;
  for (const auto& kv : o.items) {
    if (name == "items") out.push_back(Value::tuple_of({Value::string(kv.first), kv.second}));
    else if (name == "keys") out.push_back(Value::string(kv.first));
    else out.push_back(kv.second);
  }
  return Value::array(std::move(out));
}

Value bound_method(const Value& obj, const std::string& name) {
  return Value::callable(std::make_shared<NativeFunction>(name, [obj, name](Interpreter& interp, const CallArgs& args) {
    if (obj.is_string()) return call_string_method(interp, obj.str(), name, args);
    return call_dict_method(obj, name, args);
  }));
}

// Python index normalization for one position; false when out of range.
bool normalize_index(int64_t idx, size_t size, size_t* out) {
  int64_t n = static_cast<int64_t>(size);
  if (idx < 0) idx += n;
  if (idx < 0 || idx >= n) return false;
  *out = static_cast<size_t>(idx);
  return true;
}

}  // namespace

const Value* CallArgs::get(size_t pos, const std::string& name) const {
  if (pos < positional.size()) return &positional[pos];
  if (!name.empty()) {
    for (const auto& kv : keyword)
      if (kv.first == name) return &kv.second;
  }
  return nullptr;
}

std::string apply_case(const std::string& s, char mode) {
  std::string out = s;
  bool word_start = true;
  for (size_t k = 0; k < out.size(); ++k) {
    char& c = out[k];
    bool lower = c >= 'a' && c <= 'z';
    bool upper = c >= 'A' && c <= 'Z';
    switch (mode) {
      case 'u':
        if (lower) c = static_cast<char>(c - 32);
        break;
      case 'l':
        if (upper) c = static_cast<char>(c + 32);
        break;
      case 'c':
        if (k == 0 && lower) c = static_cast<char>(c - 32);
        if (k > 0 && upper) c = static_cast<char>(c + 32);
        break;
      case 't':
        // Python str.title(): a letter after a non-letter starts a word.
        if (lower || upper) {
          if (word_start && lower) c = static_cast<char>(c - 32);
          if (!word_start && upper) c = static_cast<char>(c + 32);
          word_start = false;
        } else if (static_cast<unsigned char>(c) < 0x80 || (static_cast<unsigned char>(c) & 0xc0) != 0x80) {
          word_start = static_cast<unsigned char>(c) < 0x80;
        }
        break;
      default:
        break;
    }
  }
  return out;
}

Value get_attr(const Value& obj, const std::string& name) {
  switch (obj.kind) {
    case K::kObject:
      if (dict_methods().count(name) != 0) return bound_method(obj, name);
      if (const Value* v = obj.attrs().find(name)) return *v;
      return Value::undefined(name);
    case K::kNamespace:
      if (const Value* v = obj.attrs().find(name)) return *v;
      return Value::undefined(name);
    case K::kString:
      if (string_methods().count(name) != 0) return bound_method(obj, name);
      return Value::undefined(name);
    default:
      return Value::undefined(name);
  }
}

Value get_item(const Value& obj, const Value& key, int line) {
  switch (obj.kind) {
    case K::kArray: {
      size_t idx;
      if ((key.kind == K::kInt || key.kind == K::kBool) &&
          normalize_index(key.kind == K::kBool ? key.b : key.i, obj.arr().size(), &idx)) {
        return obj.arr()[idx];
      }
      return Value::undefined();
    }
    case K::kString: {
      if (key.kind == K::kInt) {
        auto chars = utf8_chars(obj.str());
        size_t idx;
        if (normalize_index(key.i, chars.size(), &idx)) return Value::string(chars[idx]);
        return Value::undefined();
      }
      if (key.is_string()) return get_attr(obj, key.str());
      return Value::undefined();
    }
    case K::kObject:
    case K::kNamespace: {
      if (!key.is_string()) return Value::undefined();
      if (const Value* v = obj.attrs().find(key.str())) return *v;
      if (obj.kind == K::kObject && dict_methods().count(key.str()) != 0) return bound_method(obj, key.str());
      return Value::undefined(key.str());
    }
    case K::kUndefined:
      return Value::undefined(key.is_string() ? key.str() : "");
    default:
      (void)line;
      return Value::undefined();
  }
}

Value slice_value(const Value& obj, const Value& start_v, const Value& stop_v, const Value& step_v, int line) {
  auto as_opt = [&](const Value& v, const char* what) -> std::pair<bool, int64_t> {
    if (v.is_none() || v.is_undefined()) return {false, 0};
    if (v.kind == K::kInt) return {true, v.i};
    if (v.kind == K::kBool) return {true, v.b};
    fail(line, std::string("slice ") + what + " must be an integer or None");
  };
  auto [has_start, start] = as_opt(start_v, "start");
  auto [has_stop, stop] = as_opt(stop_v, "stop");
  auto [has_step, step] = as_opt(step_v, "step");
  if (!has_step) step = 1;
  if (step == 0) fail(line, "slice step cannot be zero");
  std::vector<Value> items;
  if (obj.is_string()) {
    for (auto& c : utf8_chars(obj.str())) items.push_back(Value::string(std::move(c)));
  } else if (obj.is_array()) {
    items = obj.arr();
  } else if (obj.is_undefined()) {
    return Value::undefined();
  } else {
    fail(line, std::string("'") + obj.type_name() + "' object is not subscriptable");
  }
  int64_t n = static_cast<int64_t>(items.size());
  auto clamp = [&](bool has, int64_t v, int64_t dflt) {
    if (!has) return dflt;
    if (v < 0) v += n;
    if (step > 0) return std::clamp<int64_t>(v, 0, n);
    return std::clamp<int64_t>(v, -1, n - 1);
  };
  int64_t b = clamp(has_start, start, step > 0 ? 0 : n - 1);
  int64_t e = clamp(has_stop, stop, step > 0 ? n : -1);
  Array out;
  for (int64_t k = b; step > 0 ? k < e : k > e; k += step) out.push_back(items[static_cast<size_t>(k)]);
  if (obj.is_string()) {
    std::string s;
    for (const Value& v : out) s += v.str();
    return Value::string(std::move(s));
  }
  return Value::array(std::move(out));
}

}  // namespace rl::jinja
