// jinja2's builtin filters (and transformers' tojson), with Python semantics.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "chat/builtins.h"
#include "chat/interpreter.h"
#include "chat/template_error.h"

namespace rl::jinja {

namespace {

using K = Value::Kind;

bool arg_bool(const CallArgs& args, size_t pos, const char* name, bool dflt) {
  const Value* v = args.get(pos, name);
  return v == nullptr ? dflt : v->truthy();
}

// jinja2's make_attrgetter: "a.b.0" walks attributes/items; integer parts index lists.
Value attr_path(const Value& item, const Value& attribute, int line) {
  if (attribute.is_int()) return get_item(item, attribute, line);
  if (!attribute.is_string()) fail(line, "attribute must be a string or an integer");
  Value v = item;
  const std::string& path = attribute.str();
  size_t pos = 0;
  while (true) {
    size_t dot = path.find('.', pos);
    std::string part = path.substr(pos, dot == std::string::npos ? std::string::npos : dot - pos);
    bool digits = !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
    v = digits ? get_item(v, Value::integer(std::stoll(part)), line) : get_item(v, Value::string(part), line);
    if (dot == std::string::npos) break;
    pos = dot + 1;
  }
  return v;
}

Value ignore_case(const Value& v) { return v.is_string() ? Value::string(apply_case(v.str(), 'l')) : v; }

std::string ascii_escape_json(const std::string& s) {
  std::string out;
  for (size_t k = 0; k < s.size();) {
    unsigned char c = static_cast<unsigned char>(s[k]);
    if (c < 0x80) {
      out.push_back(static_cast<char>(c));
      ++k;
      continue;
    }
    size_t n = (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : 4;
    uint32_t cp = n == 2 ? (c & 0x1f) : n == 3 ? (c & 0x0f) : (c & 0x07);
    for (size_t d = 1; d < n && k + d < s.size(); ++d) cp = (cp << 6) | (static_cast<unsigned char>(s[k + d]) & 0x3f);
    char buf[16];
    if (cp >= 0x10000) {
      cp -= 0x10000;
      std::snprintf(buf, sizeof(buf), "\\u%04x\\u%04x", 0xd800 + (cp >> 10), 0xdc00 + (cp & 0x3ff));
    } else {
      std::snprintf(buf, sizeof(buf), "\\u%04x", cp);
    }
    out += buf;
    k += n;
  }
  return out;
}

Value filter_tojson(const Value& v, const CallArgs& args) {
  const Value* indent_v = args.get(0, "indent");
  int indent = -1;
  if (indent_v != nullptr && !indent_v->is_none()) {
    if (!indent_v->is_int() || indent_v->i < 0 || indent_v->i > 64) fail(args.line, "tojson: indent must be an int in [0, 64]");
    indent = static_cast<int>(indent_v->i);
  }
  std::string item_sep = indent >= 0 ? "," : ", ";
  std::string key_sep = ": ";
  if (const Value* seps = args.get(2, "separators"); seps != nullptr && !seps->is_none()) {
    if (!seps->is_array() || seps->arr().size() != 2 || !seps->arr()[0].is_string() || !seps->arr()[1].is_string()) {
      fail(args.line, "tojson: separators must be a pair of strings");
    }
    item_sep = seps->arr()[0].str();
    key_sep = seps->arr()[1].str();
  }
  std::string out, error;
  if (!dump_json(v, indent, item_sep, key_sep, arg_bool(args, 3, "sort_keys", false), &out, &error)) {
    fail(args.line, "tojson: " + error);
  }
  if (arg_bool(args, 1, "ensure_ascii", false)) out = ascii_escape_json(out);
  return Value::string(std::move(out));
}

int64_t length_of(const Value& v, int line) {
  switch (v.kind) {
    case K::kString: return static_cast<int64_t>(utf8_length(v.str()));
    case K::kArray: return static_cast<int64_t>(v.arr().size());
    case K::kObject:
    case K::kNamespace: return static_cast<int64_t>(v.attrs().items.size());
    case K::kUndefined: return 0;
    default: fail(line, std::string("object of type '") + v.type_name() + "' has no len()");
  }
}

// Python int(str): optional sign, digits, underscores between digits, surrounding whitespace.
bool parse_int(const std::string& s, int64_t* out) {
  std::string t;
  size_t b = s.find_first_not_of(" \t\n\r\f\v"), e = s.find_last_not_of(" \t\n\r\f\v");
  if (b == std::string::npos) return false;
  for (size_t k = b; k <= e; ++k)
    if (s[k] != '_') t.push_back(s[k]);
  if (t.empty()) return false;
  char* end = nullptr;
  errno = 0;
  long long v = std::strtoll(t.c_str(), &end, 10);
  if (errno != 0 || *end != '\0' || !(std::isdigit(static_cast<unsigned char>(t.back())))) return false;
  *out = v;
  return true;
}

bool parse_float(const std::string& s, double* out) {
  size_t b = s.find_first_not_of(" \t\n\r\f\v");
  if (b == std::string::npos) return false;
  char* end = nullptr;
  double v = std::strtod(s.c_str() + b, &end);
  if (end == s.c_str() + b) return false;
  while (*end == ' ' || *end == '\t' || *end == '\n' || *end == '\r') ++end;
  if (*end != '\0') return false;
  *out = v;
  return true;
}

std::vector<Value> sorted(std::vector<Value> items, bool reverse, bool case_sensitive, const Value* attribute,
                          int line) {
  auto key = [&](const Value& v) { return attribute != nullptr && !attribute->is_none() ? attr_path(v, *attribute, line) : v; };
  std::stable_sort(items.begin(), items.end(), [&](const Value& x, const Value& y) {
    int c = compare_values(key(x), key(y), case_sensitive, line);
    return reverse ? c > 0 : c < 0;
  });
  return items;
}

Value select_like(Interpreter& interp, const Value& operand, const CallArgs& args, bool by_attr, bool keep) {
  std::vector<Value> out;
  size_t first_test_arg = by_attr ? 1 : 0;
  const Value* attr = by_attr ? args.get(0, "") : nullptr;
  if (by_attr && attr == nullptr) fail(args.line, "selectattr/rejectattr need an attribute name");
  const Value* test = args.get(first_test_arg, "");
  CallArgs test_args;
  test_args.line = args.line;
  for (size_t k = first_test_arg + 1; k < args.positional.size(); ++k) test_args.positional.push_back(args.positional[k]);
  for (const Value& item : iterate(operand, args.line)) {
    Value subject = by_attr ? attr_path(item, *attr, args.line) : item;
    bool pass;
    if (test == nullptr) {
      pass = subject.truthy();
    } else {
      if (!test->is_string()) fail(args.line, "test name must be a string");
      pass = apply_test(interp, test->str(), subject, test_args, args.line);
    }
    if (pass == keep) out.push_back(item);
  }
  return Value::array(std::move(out));
}

Value filter_map(Interpreter& interp, const Value& operand, const CallArgs& args) {
  Array out;
  const Value* attribute = nullptr;
  const Value* dflt = nullptr;
  for (const auto& kv : args.keyword) {
    if (kv.first == "attribute") attribute = &kv.second;
    if (kv.first == "default") dflt = &kv.second;
  }
  if (attribute != nullptr) {
    for (const Value& item : iterate(operand, args.line)) {
      Value v = attr_path(item, *attribute, args.line);
      out.push_back(v.is_undefined() && dflt != nullptr ? *dflt : v);
    }
    return Value::array(std::move(out));
  }
  if (args.positional.empty() || !args.positional[0].is_string()) fail(args.line, "map needs a filter name or attribute=");
  CallArgs fargs;
  fargs.line = args.line;
  fargs.positional.assign(args.positional.begin() + 1, args.positional.end());
  for (const Value& item : iterate(operand, args.line)) {
    out.push_back(apply_filter(interp, args.positional[0].str(), item, fargs, args.line));
  }
  return Value::array(std::move(out));
}

std::string do_indent(const std::string& s, const CallArgs& args) {
  const Value* width = args.get(0, "width");
  std::string ind = width == nullptr ? "    " : width->is_string() ? width->str()
                    : width->is_int() ? std::string(static_cast<size_t>(std::clamp<int64_t>(width->i, 0, 1024)), ' ')
                                      : "    ";
  bool first = arg_bool(args, 1, "first", false);
  bool blank = arg_bool(args, 2, "blank", false);
  std::vector<std::string> lines;
  std::string text = s + "\n";
  size_t b = 0;
  for (size_t k = 0; k < text.size(); ++k) {
    if (text[k] == '\n') {
      lines.push_back(text.substr(b, k - b));
      b = k + 1;
    }
  }
  std::string rv;
  for (size_t k = 0; k < lines.size(); ++k) {
    if (k > 0) rv += "\n";
    bool indent_line = k > 0 && (blank || !lines[k].empty());
    rv += (indent_line ? ind : "") + lines[k];
    if (rv.size() > (size_t{32} << 20)) {  // a long indent string times many lines
      fail(args.line, "output limit exceeded: indent() result longer than 33554432 bytes");
    }
  }
  if (first) rv = ind + rv;
  return rv;
}

std::string do_title(const std::string& s) {
  // jinja2: words begin after runs of "-", whitespace, "(", "{", "[", "<".
  std::string out;
  bool start = true;
  for (char c : s) {
    bool sep = c == '-' || c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '(' || c == '{' || c == '[' || c == '<';
    if (sep) {
      out.push_back(c);
      start = true;
      continue;
    }
    out += start ? apply_case(std::string(1, c), 'u') : apply_case(std::string(1, c), 'l');
    start = false;
  }
  return out;
}

}  // namespace

Value apply_filter(Interpreter& interp, const std::string& name, const Value& v, const CallArgs& args, int line) {
  if (name == "safe") return v;
  if (name == "tojson") return filter_tojson(v, args);
  if (name == "default" || name == "d") {
    const Value* dflt = args.get(0, "default_value");
    bool boolean = arg_bool(args, 1, "boolean", false);
    if (v.is_undefined() || (boolean && !v.truthy())) return dflt != nullptr ? *dflt : Value::string("");
    return v;
  }
  if (name == "string") return Value::string(v.to_str());
  if (name == "length" || name == "count") return Value::integer(length_of(v, line));
  if (name == "list") return Value::array(iterate(v, line));
  if (name == "items") {
    if (v.is_undefined()) return Value::array({});
    if (!v.has_attributes()) fail(line, std::string("items filter needs a mapping, got '") + v.type_name() + "'");
    Array out;
    for (const auto& kv : v.attrs().items) out.push_back(Value::tuple_of({Value::string(kv.first), kv.second}));
    return Value::array(std::move(out));
  }
  if (name == "first" || name == "last") {
    std::vector<Value> items = iterate(v, line);
    if (items.empty()) return Value::undefined();
    return name == "first" ? items.front() : items.back();
  }
  if (name == "selectattr") return select_like(interp, v, args, true, true);
  if (name == "rejectattr") return select_like(interp, v, args, true, false);
  if (name == "select") return select_like(interp, v, args, false, true);
  if (name == "reject") return select_like(interp, v, args, false, false);
  if (name == "map") return filter_map(interp, v, args);
  if (name == "attr") {
    const Value* a = args.get(0, "name");
    if (a == nullptr || !a->is_string()) fail(line, "attr needs an attribute name");
    return get_attr(v, a->str());
  }
  if (name == "join") {
    const Value* sep = args.get(0, "d");
    const Value* attribute = args.get(1, "attribute");
    std::string out;
    bool first = true;
    for (const Value& item : iterate(v, line)) {
      if (!first) out += sep != nullptr ? sep->to_str() : "";
      out += (attribute != nullptr ? attr_path(item, *attribute, line) : item).to_str();
      first = false;
      interp.check_string_size(out.size(), line);
    }
    return Value::string(std::move(out));
  }
  if (name == "reverse") {
    if (v.is_string()) {
      auto chars = utf8_chars(v.str());
      std::string out;
      for (auto it = chars.rbegin(); it != chars.rend(); ++it) out += *it;
      return Value::string(std::move(out));
    }
    std::vector<Value> items = iterate(v, line);
    std::reverse(items.begin(), items.end());
    return Value::array(std::move(items));
  }
  if (name == "sort") {
    return Value::array(sorted(iterate(v, line), arg_bool(args, 0, "reverse", false),
                               arg_bool(args, 1, "case_sensitive", false), args.get(2, "attribute"), line));
  }
  if (name == "dictsort") {
    if (!v.has_attributes()) fail(line, "dictsort needs a mapping");
    bool case_sensitive = arg_bool(args, 0, "case_sensitive", false);
    const Value* by = args.get(1, "by");
    bool by_value = by != nullptr && by->is_string() && by->str() == "value";
    bool reverse = arg_bool(args, 2, "reverse", false);
    Array pairs;
    for (const auto& kv : v.attrs().items) pairs.push_back(Value::tuple_of({Value::string(kv.first), kv.second}));
    Value index = Value::integer(by_value ? 1 : 0);
    return Value::array(sorted(std::move(pairs), reverse, case_sensitive, &index, line));
  }
  if (name == "unique") {
    bool case_sensitive = arg_bool(args, 0, "case_sensitive", false);
    const Value* attribute = args.get(1, "attribute");
    Array out;
    std::vector<Value> seen;
    for (const Value& item : iterate(v, line)) {
      Value key = attribute != nullptr ? attr_path(item, *attribute, line) : item;
      if (!case_sensitive) key = ignore_case(key);
      interp.charge_work(static_cast<int64_t>(seen.size()), line);  // the scan below is O(distinct so far)
      if (std::none_of(seen.begin(), seen.end(), [&](const Value& s) { return values_equal(s, key); })) {
        seen.push_back(key);
        out.push_back(item);
      }
    }
    return Value::array(std::move(out));
  }
  if (name == "min" || name == "max" || name == "sum") {
    const Value* attribute = args.get(name == "sum" ? 0 : 1, "attribute");
    std::vector<Value> items = iterate(v, line);
    if (attribute != nullptr) {
      for (Value& item : items) item = attr_path(item, *attribute, line);
    }
    if (name == "sum") {
      const Value* start = args.get(1, "start");
      Value acc = start != nullptr ? *start : Value::integer(0);
      for (const Value& item : items) acc = binary_op(interp, BinOp::kAdd, acc, item, line);
      return acc;
    }
    if (items.empty()) return Value::undefined();
    bool case_sensitive = arg_bool(args, 0, "case_sensitive", false);
    Value best = items[0];
    for (const Value& item : items) {
      int c = compare_values(item, best, case_sensitive, line);
      if (name == "min" ? c < 0 : c > 0) best = item;
    }
    return best;
  }
  if (name == "batch") {
    const Value* count = args.get(0, "linecount");
    if (count == nullptr || !count->is_int() || count->i <= 0) fail(line, "batch needs a positive line count");
    const Value* fill = args.get(1, "fill_with");
    Array out, cur;
    for (const Value& item : iterate(v, line)) {
      if (static_cast<int64_t>(cur.size()) == count->i) {
        out.push_back(Value::array(std::move(cur)));
        cur.clear();
      }
      cur.push_back(item);
    }
    if (!cur.empty()) {
      if (fill != nullptr && !fill->is_none()) {
        interp.count_iterations(count->i, line);
        while (static_cast<int64_t>(cur.size()) < count->i) cur.push_back(*fill);
      }
      out.push_back(Value::array(std::move(cur)));
    }
    return Value::array(std::move(out));
  }
  if (name == "abs") {
    if (v.kind == K::kFloat) return Value::floating(std::fabs(v.f));
    if (v.kind == K::kInt) return Value::integer(v.i < 0 ? -v.i : v.i);
    if (v.kind == K::kBool) return Value::integer(v.b);
    fail(line, std::string("bad operand type for abs(): '") + v.type_name() + "'");
  }
  if (name == "round") {
    if (!v.is_number() && v.kind != K::kBool) fail(line, "round needs a number");
    const Value* prec_v = args.get(0, "precision");
    int64_t prec = prec_v != nullptr && prec_v->is_int() ? std::clamp<int64_t>(prec_v->i, -300, 300) : 0;
    const Value* method_v = args.get(1, "method");
    std::string method = method_v != nullptr && method_v->is_string() ? method_v->str() : "common";
    double scale = std::pow(10.0, static_cast<double>(prec));
    double x = v.as_double() * scale;
    double r;
    if (method == "common") {
      r = std::nearbyint(x);  // Python's round(): half to even
    } else if (method == "ceil") {
      r = std::ceil(x);
    } else if (method == "floor") {
      r = std::floor(x);
    } else {
      fail(line, "round: method must be common, ceil or floor");
    }
    return Value::floating(r / scale);
  }
  if (name == "int") {
    const Value* dflt = args.get(0, "default");
    Value fallback = dflt != nullptr ? *dflt : Value::integer(0);
    if (v.kind == K::kInt) return v;
    if (v.kind == K::kBool) return Value::integer(v.b);
    if (v.kind == K::kFloat) return std::isfinite(v.f) ? Value::integer(static_cast<int64_t>(v.f)) : fallback;
    if (v.is_string()) {
      int64_t i;
      double d;
      if (parse_int(v.str(), &i)) return Value::integer(i);
      if (parse_float(v.str(), &d) && std::isfinite(d)) return Value::integer(static_cast<int64_t>(d));
    }
    return fallback;
  }
  if (name == "float") {
    const Value* dflt = args.get(0, "default");
    Value fallback = dflt != nullptr ? *dflt : Value::floating(0.0);
    if (v.is_number() || v.kind == K::kBool) return Value::floating(v.as_double());
    double d;
    if (v.is_string() && parse_float(v.str(), &d)) return Value::floating(d);
    return fallback;
  }
  if (name == "wordcount") {
    int64_t n = 0;
    bool in_word = false;
    for (unsigned char c : v.to_str()) {
      bool w = std::isalnum(c) || c == '_' || c >= 0x80;
      if (w && !in_word) ++n;
      in_word = w;
    }
    return Value::integer(n);
  }
  if (name == "format") {
    CallArgs fargs;
    return binary_op(interp, BinOp::kMod, Value::string(v.to_str()), Value::array(args.positional), line);
  }
  // Filters on strings (jinja2 applies them to str(value)).
  std::string s = v.to_str();
  if (name == "trim") {
    CallArgs a;
    a.line = line;
    if (const Value* chars = args.get(0, "chars")) a.positional.push_back(*chars);
    return interp.call(get_attr(Value::string(s), "strip"), a, line);
  }
  if (name == "upper") return Value::string(apply_case(s, 'u'));
  if (name == "lower") return Value::string(apply_case(s, 'l'));
  if (name == "capitalize") return Value::string(apply_case(s, 'c'));
  if (name == "title") return Value::string(do_title(s));
  if (name == "indent") return Value::string(do_indent(s, args));
  if (name == "replace") {
    CallArgs a;
    a.line = line;
    a.positional = args.positional;
    a.keyword = args.keyword;
    return interp.call(get_attr(Value::string(s), "replace"), a, line);
  }
  if (name == "escape" || name == "e" || name == "forceescape") {
    std::string out;
    for (char c : s) {
      switch (c) {
        case '&': out += "&amp;"; break;
        case '<': out += "&lt;"; break;
        case '>': out += "&gt;"; break;
        case '"': out += "&#34;"; break;
        case '\'': out += "&#39;"; break;
        default: out.push_back(c);
      }
    }
    return Value::string(std::move(out));
  }
  if (name == "center") {
    const Value* w = args.get(0, "width");
    int64_t width = w != nullptr && w->is_int() ? std::min<int64_t>(w->i, 1 << 20) : 80;
    int64_t len = static_cast<int64_t>(utf8_length(s));
    if (len >= width) return Value::string(s);
    int64_t total = width - len, left = total / 2 + (total & width & 1);
    return Value::string(std::string(static_cast<size_t>(left), ' ') + s +
                         std::string(static_cast<size_t>(total - left), ' '));
  }
  fail(line, "unknown filter '" + name + "'");
}

}  // namespace rl::jinja
