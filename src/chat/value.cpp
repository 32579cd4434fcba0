#include "chat/value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "chat/callable.h"
#include "chat/template_error.h"

namespace rl::jinja {

namespace {

// A printed value (repr, str, tojson) longer than this is an error: a list holding one 32 MiB string a million
// times would otherwise print as 32 TiB. Matches RenderLimits::max_output_bytes' default.
constexpr size_t kMaxPrintedBytes = size_t{32} << 20;

void check_printed(const std::string& out) {
  if (out.size() > kMaxPrintedBytes) {
    fail(0, "output limit exceeded: a value prints to more than " + std::to_string(kMaxPrintedBytes) + " bytes");
  }
}


const std::shared_ptr<const std::string>& empty_string() {
  static const auto kEmpty = std::make_shared<const std::string>();
  return kEmpty;
}

void append_json_string(const std::string& s, std::string* out) {
  out->push_back('"');
  for (unsigned char c : s) {
    switch (c) {
      case '"': *out += "\\\""; break;
      case '\\': *out += "\\\\"; break;
      case '\n': *out += "\\n"; break;
      case '\r': *out += "\\r"; break;
      case '\t': *out += "\\t"; break;
      case '\b': *out += "\\b"; break;
      case '\f': *out += "\\f"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          *out += buf;
        } else {
          out->push_back(static_cast<char>(c));
        }
    }
  }
  out->push_back('"');
}

struct JsonDumper {
  int indent;
  const std::string& item_sep;
  const std::string& key_sep;
  bool sort_keys;
  std::string* out;
  std::string* error;

  void newline(int depth) {
    out->push_back('\n');
    out->append(static_cast<size_t>(indent) * depth, ' ');
  }

  bool dump(const Value& v, int depth) {
    if (depth > 512) {
      *error = "tojson: nesting too deep";
      return false;
    }
    switch (v.kind) {
      case Value::Kind::kNone: *out += "null"; return true;
      case Value::Kind::kBool: *out += v.b ? "true" : "false"; return true;
      case Value::Kind::kInt: *out += std::to_string(v.i); return true;
      case Value::Kind::kFloat:
        if (std::isnan(v.f)) *out += "NaN";
        else if (std::isinf(v.f)) *out += v.f > 0 ? "Infinity" : "-Infinity";
        else *out += format_python_float(v.f);
        return true;
      case Value::Kind::kString: append_json_string(v.str(), out); return true;
      case Value::Kind::kArray: {
        const Array& a = v.arr();
        if (a.empty()) {
          *out += "[]";
          return true;
        }
        out->push_back('[');
        for (size_t k = 0; k < a.size(); ++k) {
          if (k > 0) *out += item_sep;
          if (indent >= 0) newline(depth + 1);
          if (!dump(a[k], depth + 1)) return false;
          check_printed(*out);
        }
        if (indent >= 0) newline(depth);
        out->push_back(']');
        return true;
      }
      case Value::Kind::kObject:
      case Value::Kind::kNamespace: {
        const auto& items = v.attrs().items;
        if (items.empty()) {
          *out += "{}";
          return true;
        }
        std::vector<size_t> order(items.size());
        for (size_t k = 0; k < order.size(); ++k) order[k] = k;
        if (sort_keys) {
          std::stable_sort(order.begin(), order.end(),
                           [&](size_t x, size_t y) { return items[x].first < items[y].first; });
        }
        out->push_back('{');
        for (size_t k = 0; k < order.size(); ++k) {
          if (k > 0) *out += item_sep;
          if (indent >= 0) newline(depth + 1);
          append_json_string(items[order[k]].first, out);
          *out += key_sep;
          if (!dump(items[order[k]].second, depth + 1)) return false;
          check_printed(*out);
        }
        if (indent >= 0) newline(depth);
        out->push_back('}');
        return true;
      }
      case Value::Kind::kUndefined:
        *error = "Object of type Undefined is not JSON serializable";
        return false;
      case Value::Kind::kCallable:
        *error = "Object of type function is not JSON serializable";
        return false;
    }
    return false;
  }
};

// Containers whose last owner is being destroyed hand their elements here instead of destroying them in place,
// so destruction is a loop rather than a recursion as deep as the value (~Value).
struct Graveyard {
  std::vector<Value> pending;
  bool draining = false;
};
thread_local Graveyard t_graveyard;

bool is_container(const Value& v) { return v.a || v.o || v.ns; }

uint32_t element_depth(const Value& v) {
  switch (v.kind) {
    case Value::Kind::kArray:
    case Value::Kind::kObject: return v.depth;
    case Value::Kind::kNamespace: return 1;
    default: return 0;
  }
}

void check_items(size_t n) {
  if (n > kMaxValueItems) fail(0, "a list or dict of more than " + std::to_string(kMaxValueItems) + " items");
}

uint32_t container_depth(uint32_t deepest_element) {
  const uint32_t d = deepest_element + 1;
  if (d > kMaxValueDepth) {
    fail(0, "a list or dict nested deeper than " + std::to_string(kMaxValueDepth) + " levels");
  }
  return d;
}

}  // namespace

Value::~Value() {
  if (!is_container(*this)) return;
  Graveyard& g = t_graveyard;
  // A container this value alone owns: move its nested containers to the graveyard. They were created non-const
  // (array(), object(), namespace_()), so the const_cast is sound; nobody else can see them any more.
  const auto bury = [&](Value& v) {
    if (is_container(v)) g.pending.push_back(std::move(v));
  };
  if (a && a.use_count() == 1) {
    for (Value& v : const_cast<Array&>(*a)) bury(v);
  }
  if (o && o.use_count() == 1) {
    for (auto& kv : const_cast<Object&>(*o).items) bury(kv.second);
  }
  if (ns && ns.use_count() == 1) {
    for (auto& kv : ns->items) bury(kv.second);
  }
  if (g.draining) return;  // an outer ~Value is already emptying the graveyard
  g.draining = true;
  while (!g.pending.empty()) {
    Value v = std::move(g.pending.back());
    g.pending.pop_back();
  }  // each v buries its own elements as it goes
  g.draining = false;
}

Value Value::undefined(const std::string& hint) {
  Value v;
  if (!hint.empty()) v.s = std::make_shared<const std::string>(hint);
  return v;
}
Value Value::none() {
  Value v;
  v.kind = Kind::kNone;
  return v;
}
Value Value::boolean(bool x) {
  Value v;
  v.kind = Kind::kBool;
  v.b = x;
  return v;
}
Value Value::integer(int64_t x) {
  Value v;
  v.kind = Kind::kInt;
  v.i = x;
  return v;
}
Value Value::floating(double x) {
  Value v;
  v.kind = Kind::kFloat;
  v.f = x;
  return v;
}
Value Value::string(std::string x) {
  Value v;
  v.kind = Kind::kString;
  v.s = x.empty() ? empty_string() : std::make_shared<const std::string>(std::move(x));
  return v;
}
Value Value::array(Array x) {
  Value v;
  v.kind = Kind::kArray;
  check_items(x.size());
  uint32_t deepest = 0;
  for (const Value& e : x) deepest = std::max(deepest, element_depth(e));
  v.depth = container_depth(deepest);
  v.a = std::make_shared<Array>(std::move(x));
  return v;
}
Value Value::tuple_of(Array x) {
  Value v = array(std::move(x));
  v.tuple = true;
  return v;
}
Value Value::object(Object x) {
  Value v;
  v.kind = Kind::kObject;
  check_items(x.items.size());
  uint32_t deepest = 0;
  for (const auto& kv : x.items) deepest = std::max(deepest, element_depth(kv.second));
  v.depth = container_depth(deepest);
  v.o = std::make_shared<Object>(std::move(x));
  return v;
}
Value Value::namespace_(Object x) {
  Value v;
  v.kind = Kind::kNamespace;
  v.ns = std::make_shared<Object>(std::move(x));
  return v;
}
Value Value::callable(std::shared_ptr<const Callable> c) {
  Value v;
  v.kind = Kind::kCallable;
  v.fn = std::move(c);
  return v;
}

namespace {

// One level of the JSON being converted, for the error path: an object key or an array index.
struct JsonStep {
  const std::string* key;  // null for an array element
  size_t index;
};

std::string json_path(const std::string& what, const std::vector<JsonStep>& path) {
  std::string out = what;
  for (const JsonStep& s : path) {
    if (s.key != nullptr) {
      out += '.';
      out += *s.key;
    } else {
      out += '[';
      out += std::to_string(s.index);
      out += ']';
    }
  }
  return out;
}

// Recursion depth is bounded by kMaxValueDepth: the depth is checked before descending.
Value convert_json(const OrderedJson& j, const std::string& what, std::vector<JsonStep>* path) {
  switch (j.type()) {
    case OrderedJson::value_t::null: return Value::none();
    case OrderedJson::value_t::boolean: return Value::boolean(j.get<bool>());
    case OrderedJson::value_t::number_integer: return Value::integer(j.get<int64_t>());
    case OrderedJson::value_t::number_unsigned: {
      uint64_t u = j.get<uint64_t>();
      if (u > static_cast<uint64_t>(INT64_MAX)) return Value::floating(static_cast<double>(u));
      return Value::integer(static_cast<int64_t>(u));
    }
    case OrderedJson::value_t::number_float: return Value::floating(j.get<double>());
    case OrderedJson::value_t::string: return Value::string(j.get<std::string>());
    case OrderedJson::value_t::array:
    case OrderedJson::value_t::object: break;
    default: return Value::undefined();
  }
  if (path->size() >= kMaxValueDepth) {
    fail(0, json_path(what, *path) + ": nested deeper than " + std::to_string(kMaxValueDepth) + " levels");
  }
  if (j.is_array()) {
    Array a;
    a.reserve(j.size());
    for (const auto& e : j) {
      path->push_back(JsonStep{nullptr, a.size()});
      a.push_back(convert_json(e, what, path));
      path->pop_back();
    }
    return Value::array(std::move(a));
  }
  Object o;
  for (auto it = j.begin(); it != j.end(); ++it) {
    path->push_back(JsonStep{&it.key(), 0});
    o.set(it.key(), convert_json(it.value(), what, path));
    path->pop_back();
  }
  return Value::object(std::move(o));
}

}  // namespace

Value Value::from_json(const OrderedJson& j, const std::string& what) {
  std::vector<JsonStep> path;
  return convert_json(j, what, &path);
}

const Object& Value::attrs() const { return kind == Kind::kNamespace ? *ns : *o; }

bool Value::truthy() const {
  switch (kind) {
    case Kind::kUndefined:
    case Kind::kNone: return false;
    case Kind::kBool: return b;
    case Kind::kInt: return i != 0;
    case Kind::kFloat: return f != 0.0;
    case Kind::kString: return !s->empty();
    case Kind::kArray: return !a->empty();
    case Kind::kObject: return !o->items.empty();
    case Kind::kNamespace:
    case Kind::kCallable: return true;
  }
  return false;
}

std::string Value::to_str() const {
  switch (kind) {
    case Kind::kUndefined: return "";
    case Kind::kString: return *s;
    default: return repr();
  }
}

namespace {

void repr_into(const Value& v, std::string* out) {
  using K = Value::Kind;
  if (v.kind == K::kArray) {
    *out += v.tuple ? "(" : "[";
    for (size_t k = 0; k < v.arr().size(); ++k) {
      if (k > 0) *out += ", ";
      repr_into(v.arr()[k], out);  // recursion bounded by kMaxValueDepth
      check_printed(*out);
    }
    if (v.tuple) *out += v.arr().size() == 1 ? ",)" : ")";
    else *out += "]";
    return;
  }
  if (v.kind == K::kObject) {
    *out += "{";
    for (size_t k = 0; k < v.o->items.size(); ++k) {
      if (k > 0) *out += ", ";
      *out += python_string_repr(v.o->items[k].first) + ": ";
      repr_into(v.o->items[k].second, out);
      check_printed(*out);
    }
    *out += "}";
    return;
  }
  *out += v.repr();
}

}  // namespace

std::string Value::repr() const {
  if (kind == Kind::kArray || kind == Kind::kObject) {
    std::string out;
    repr_into(*this, &out);
    return out;
  }
  switch (kind) {
    case Kind::kUndefined: return "";
    case Kind::kNone: return "None";
    case Kind::kBool: return b ? "True" : "False";
    case Kind::kInt: return std::to_string(i);
    case Kind::kFloat:
      if (std::isnan(f)) return "nan";
      if (std::isinf(f)) return f > 0 ? "inf" : "-inf";
      return format_python_float(f);
    case Kind::kString: return python_string_repr(*s);
    case Kind::kArray:
    case Kind::kObject: return "";  // handled above
    case Kind::kNamespace: return "<Namespace>";
    case Kind::kCallable: return "<function " + fn->name() + ">";
  }
  return "";
}

const char* Value::type_name() const {
  switch (kind) {
    case Kind::kUndefined: return "undefined";
    case Kind::kNone: return "NoneType";
    case Kind::kBool: return "bool";
    case Kind::kInt: return "int";
    case Kind::kFloat: return "float";
    case Kind::kString: return "str";
    case Kind::kArray: return "list";
    case Kind::kObject: return "dict";
    case Kind::kNamespace: return "Namespace";
    case Kind::kCallable: return "function";
  }
  return "?";
}

const Value* Object::find(const std::string& key) const {
  if (items.size() <= 8) {
    for (const auto& kv : items)
      if (kv.first == key) return &kv.second;
    return nullptr;
  }
  auto it = index_.find(key);
  return it == index_.end() ? nullptr : &items[it->second].second;
}

void Object::set(const std::string& key, Value v) {
  if (items.size() <= 8) {
    for (auto& kv : items) {
      if (kv.first == key) {
        kv.second = std::move(v);
        return;
      }
    }
  } else {
    auto it = index_.find(key);
    if (it != index_.end()) {
      items[it->second].second = std::move(v);
      return;
    }
  }
  items.emplace_back(key, std::move(v));
  if (items.size() == 9) {
    for (size_t k = 0; k < items.size(); ++k) index_[items[k].first] = k;
  } else if (items.size() > 9) {
    index_[key] = items.size() - 1;
  }
}

bool values_equal(const Value& x, const Value& y) {
  using K = Value::Kind;
  auto numeric = [](const Value& v) { return v.kind == K::kInt || v.kind == K::kFloat || v.kind == K::kBool; };
  if (numeric(x) && numeric(y)) {
    if (x.kind != K::kFloat && y.kind != K::kFloat) {
      int64_t a = x.kind == K::kBool ? x.b : x.i;
      int64_t b = y.kind == K::kBool ? y.b : y.i;
      return a == b;
    }
    return x.as_double() == y.as_double();
  }
  if (x.kind != y.kind) return false;
  switch (x.kind) {
    case K::kUndefined:
    case K::kNone: return true;
    case K::kString: return x.str() == y.str();
    case K::kArray: {
      if (x.arr().size() != y.arr().size()) return false;
      for (size_t k = 0; k < x.arr().size(); ++k)
        if (!values_equal(x.arr()[k], y.arr()[k])) return false;
      return true;
    }
    case K::kObject: {
      const auto& a = x.attrs().items;
      if (a.size() != y.attrs().items.size()) return false;
      for (const auto& kv : a) {
        const Value* other = y.attrs().find(kv.first);
        if (other == nullptr || !values_equal(kv.second, *other)) return false;
      }
      return true;
    }
    case K::kNamespace: return x.ns == y.ns;
    case K::kCallable: return x.fn == y.fn;
    default: return false;
  }
}

bool dump_json(const Value& v, int indent, const std::string& item_sep, const std::string& key_sep, bool sort_keys,
               std::string* out, std::string* error) {
  JsonDumper d{indent, item_sep, key_sep, sort_keys, out, error};
  return d.dump(v, 0);
}

std::string format_python_float(double d) {
  if (d == 0.0) return std::signbit(d) ? "-0.0" : "0.0";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), d, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  // sci: [-]D[.DDD]e(+|-)XX
  size_t e = sci.find('e');
  int exp = std::stoi(sci.substr(e + 1));
  std::string mant = sci.substr(0, e);
  bool neg = mant[0] == '-';
  if (neg) mant.erase(0, 1);
  std::string digits;
  for (char c : mant)
    if (c != '.') digits.push_back(c);
  std::string out;
  if (exp >= -5 + 1 && exp < 16) {
    // Fixed notation: the decimal point sits after digit number exp+1.
    if (exp >= 0) {
      if (static_cast<int>(digits.size()) <= exp + 1) {
        out = digits + std::string(exp + 1 - digits.size(), '0') + ".0";
      } else {
        out = digits.substr(0, exp + 1) + "." + digits.substr(exp + 1);
      }
    } else {
      out = "0." + std::string(-exp - 1, '0') + digits;
    }
  } else {
    out = digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    char eb[16];
    std::snprintf(eb, sizeof(eb), "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
    out += eb;
  }
  return neg ? "-" + out : out;
}

std::string python_string_repr(const std::string& s) {
  bool has_single = s.find('\'') != std::string::npos;
  bool has_double = s.find('"') != std::string::npos;
  char q = (has_single && !has_double) ? '"' : '\'';
  std::string out(1, q);
  for (unsigned char c : s) {
    if (c == q || c == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(c));
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02x", c);
      out += buf;
    } else {
      out.push_back(static_cast<char>(c));
    }
  }
  out.push_back(q);
  return out;
}

namespace {

// KMP failure function: fail[i] = length of the longest proper border of needle[0..i].
std::vector<size_t> borders(std::string_view needle) {
  std::vector<size_t> fail(needle.size(), 0);
  for (size_t i = 1, k = 0; i < needle.size(); ++i) {
    while (k > 0 && needle[i] != needle[k]) k = fail[k - 1];
    if (needle[i] == needle[k]) ++k;
    fail[i] = k;
  }
  return fail;
}

}  // namespace

size_t find_text(std::string_view hay, std::string_view needle, size_t from) {
  if (from > hay.size()) return std::string_view::npos;
  // Short needles: the library search is linear for them (at most 2 comparisons per position).
  if (needle.size() <= 2) return hay.find(needle, from);
  const std::vector<size_t> fail = borders(needle);
  for (size_t i = from, k = 0; i < hay.size(); ++i) {
    while (k > 0 && hay[i] != needle[k]) k = fail[k - 1];
    if (hay[i] == needle[k]) ++k;
    if (k == needle.size()) return i + 1 - needle.size();
  }
  return std::string_view::npos;
}

size_t rfind_text(std::string_view hay, std::string_view needle) {
  if (needle.empty()) return hay.size();
  if (needle.size() <= 2) return hay.rfind(needle);
  const std::vector<size_t> fail = borders(needle);
  size_t last = std::string_view::npos;
  for (size_t i = 0, k = 0; i < hay.size(); ++i) {
    while (k > 0 && hay[i] != needle[k]) k = fail[k - 1];
    if (hay[i] == needle[k]) ++k;
    if (k == needle.size()) {
      last = i + 1 - needle.size();
      k = fail[k - 1];
    }
  }
  return last;
}

std::vector<std::string> utf8_chars(const std::string& s) {
  check_items(utf8_length(s));  // before allocating one string per character
  std::vector<std::string> out;
  for (size_t k = 0; k < s.size();) {
    unsigned char c = static_cast<unsigned char>(s[k]);
    size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 1;
    n = std::min(n, s.size() - k);
    out.emplace_back(s.substr(k, n));
    k += n;
  }
  return out;
}

size_t utf8_length(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s)
    if ((c & 0xc0) != 0x80) ++n;
  return n;
}

}  // namespace rl::jinja
