// Runtime values of the Jinja engine, with Python semantics (jinja2 runs on Python objects): truthiness, ==,
// str() and repr() printing, and json.dumps as transformers' tojson does it.
// Arrays, objects and strings are immutable and shared (copying a Value is cheap); only a Namespace is mutable,
// as in jinja2's sandbox where `{% set ns.x = ... %}` is the one allowed mutation.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/json.h"

namespace rl::jinja {

struct Value;
struct Object;
class Callable;
using Array = std::vector<Value>;

// How deeply lists and dicts may nest, whether they come from JSON (messages, tools, kwargs) or are built by the
// template: every recursive walk over a value (printing, ==, tojson) is bounded by it.
constexpr uint32_t kMaxValueDepth = 128;
// How many elements one list or dict may hold (bounds memory: a 32 MiB string split into characters would
// otherwise be 32M values).
constexpr size_t kMaxValueItems = size_t{1} << 20;

struct Value {
  enum class Kind { kUndefined, kNone, kBool, kInt, kFloat, kString, kArray, kObject, kNamespace, kCallable };

  Value() = default;
  Value(const Value&) = default;
  Value(Value&&) noexcept = default;
  Value& operator=(const Value&) = default;
  Value& operator=(Value&&) noexcept = default;
  // Iterative: a value that alone owns a deep chain of containers (a million nested namespaces) is torn down
  // without recursion (see value.cpp).
  ~Value();

  Kind kind = Kind::kUndefined;
  bool b = false;
  bool tuple = false;  // kArray: a Python tuple (prints as (a, b)); otherwise it behaves as a list
  // kArray / kObject: 1 + the deepest element (scalars and strings 0, a namespace 1), at most kMaxValueDepth.
  uint32_t depth = 0;
  int64_t i = 0;
  double f = 0.0;
  std::shared_ptr<const std::string> s;      // kString; kUndefined: the name it came from (for errors), may be null
  std::shared_ptr<const Array> a;            // kArray
  std::shared_ptr<const Object> o;           // kObject
  std::shared_ptr<Object> ns;                // kNamespace (mutable attributes)
  std::shared_ptr<const Callable> fn;        // kCallable

  static Value undefined(const std::string& hint = "");
  static Value none();
  static Value boolean(bool v);
  static Value integer(int64_t v);
  static Value floating(double v);
  static Value string(std::string v);
  static Value array(Array v);
  static Value tuple_of(Array v);
  static Value object(Object v);
  static Value namespace_(Object v);
  static Value callable(std::shared_ptr<const Callable> c);
  // Throws TemplateError when the JSON nests deeper than kMaxValueDepth; the message names the path below
  // `what` ("messages[2].tool_calls[0]...: nested deeper than 128 levels"). Linear in the size of j.
  static Value from_json(const OrderedJson& j, const std::string& what = "JSON");

  bool is_undefined() const { return kind == Kind::kUndefined; }
  bool is_none() const { return kind == Kind::kNone; }
  bool is_string() const { return kind == Kind::kString; }
  bool is_number() const { return kind == Kind::kInt || kind == Kind::kFloat; }
  bool is_int() const { return kind == Kind::kInt; }
  bool is_array() const { return kind == Kind::kArray; }
  bool is_mapping() const { return kind == Kind::kObject; }
  bool has_attributes() const { return kind == Kind::kObject || kind == Kind::kNamespace; }
  const std::string& str() const { return *s; }
  const Array& arr() const { return *a; }
  const Object& attrs() const;  // kObject or kNamespace
  double as_double() const { return kind == Kind::kFloat ? f : static_cast<double>(kind == Kind::kBool ? b : i); }

  bool truthy() const;
  // Python str(): what {{ x }} prints. Undefined prints "".
  std::string to_str() const;
  // Python repr(): how a value prints inside a list or dict.
  std::string repr() const;
  const char* type_name() const;
};

// A Python dict: insertion-ordered keys, immutable once built (except a Namespace's, via set()).
struct Object {
  std::vector<std::pair<std::string, Value>> items;

  const Value* find(const std::string& key) const;
  void set(const std::string& key, Value v);  // replaces in place or appends
  void clear() {
    items.clear();
    index_.clear();
  }

 private:
  std::unordered_map<std::string, size_t> index_;  // key -> position in items; built on the fly
};

// Python ==: numbers by value (True == 1), strings, lists and dicts deeply; Undefined equals Undefined.
bool values_equal(const Value& x, const Value& y);

// json.dumps(v, ensure_ascii=False, indent=indent, separators=..., sort_keys=...) with Python's defaults:
// separators (", ", ": ") without indent and (",", ": ") with it. indent < 0 means None. Returns false (and sets
// *error) for values JSON cannot hold (undefined, callables).
bool dump_json(const Value& v, int indent, const std::string& item_sep, const std::string& key_sep, bool sort_keys,
               std::string* out, std::string* error);

// Python float repr: shortest round-trip digits, ".0" on integral values, exponent form outside [1e-4, 1e16).
std::string format_python_float(double d);
// Python repr of a string: single quotes unless it holds ' and no ".
std::string python_string_repr(const std::string& s);

// Substring search in O(|hay| + |needle|) (Knuth-Morris-Pratt): std::string::find is O(|hay|·|needle|) in
// the worst case, and a template controls both strings. npos when absent.
size_t find_text(std::string_view hay, std::string_view needle, size_t from = 0);
size_t rfind_text(std::string_view hay, std::string_view needle);

// UTF-8 helpers: Python indexes strings by code point.
std::vector<std::string> utf8_chars(const std::string& s);
size_t utf8_length(const std::string& s);

}  // namespace rl::jinja
