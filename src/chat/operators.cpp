// Python semantics of jinja2's operators on our values (jinja2 evaluates them as Python expressions).
#include <cmath>
#include <string>

#include "chat/builtins.h"
#include "chat/interpreter.h"
#include "chat/template_error.h"

namespace rl::jinja {

namespace {

using K = Value::Kind;

bool is_intlike(const Value& v) { return v.kind == K::kInt || v.kind == K::kBool; }
int64_t as_int(const Value& v) { return v.kind == K::kBool ? static_cast<int64_t>(v.b) : v.i; }
bool is_numeric(const Value& v) { return v.kind == K::kInt || v.kind == K::kFloat || v.kind == K::kBool; }

const char* op_symbol(BinOp op) {
  switch (op) {
    case BinOp::kAdd: return "+";
    case BinOp::kSub: return "-";
    case BinOp::kMul: return "*";
    case BinOp::kDiv: return "/";
    case BinOp::kFloorDiv: return "//";
    case BinOp::kMod: return "%";
    case BinOp::kPow: return "**";
    case BinOp::kConcat: return "~";
    case BinOp::kEq: return "==";
    case BinOp::kNe: return "!=";
    case BinOp::kLt: return "<";
    case BinOp::kLe: return "<=";
    case BinOp::kGt: return ">";
    case BinOp::kGe: return ">=";
    case BinOp::kIn: return "in";
    case BinOp::kNotIn: return "not in";
    case BinOp::kAnd: return "and";
    case BinOp::kOr: return "or";
  }
  return "?";
}

[[noreturn]] void type_error(BinOp op, const Value& x, const Value& y, int line) {
  if (x.is_undefined()) fail(line, undefined_message(x));
  if (y.is_undefined()) fail(line, undefined_message(y));
  fail(line, std::string("unsupported operand type(s) for ") + op_symbol(op) + ": '" + x.type_name() + "' and '" +
                 y.type_name() + "'");
}

// Python ints are unbounded; ours are 64-bit, so overflow is an error rather than a wrong number.
Value checked_int(BinOp op, int64_t a, int64_t b, int line) {
  int64_t r = 0;
  bool overflow = op == BinOp::kAdd   ? __builtin_add_overflow(a, b, &r)
                  : op == BinOp::kSub ? __builtin_sub_overflow(a, b, &r)
                                      : __builtin_mul_overflow(a, b, &r);
  if (overflow) fail(line, "integer overflow");
  return Value::integer(r);
}

Value repeat(Interpreter& interp, const Value& seq, int64_t times, int line) {
  if (times <= 0) return seq.is_string() ? Value::string("") : Value::array({});
  size_t total = 0;  // bytes or elements of the result, overflow-checked before anything is allocated
  const size_t unit = seq.is_string() ? seq.str().size() : seq.arr().size();
  if (__builtin_mul_overflow(unit, static_cast<uint64_t>(times), &total)) total = SIZE_MAX;
  if (seq.is_string()) {
    interp.check_string_size(total, line);
    std::string out;
    out.reserve(seq.str().size() * static_cast<size_t>(times));
    for (int64_t k = 0; k < times; ++k) out += seq.str();
    return Value::string(std::move(out));
  }
  interp.count_iterations(static_cast<int64_t>(std::min<size_t>(total, INT64_MAX / 2)), line);
  if (total > kMaxValueItems) fail(line, "a list of more than " + std::to_string(kMaxValueItems) + " items");
  Array out;
  for (int64_t k = 0; k < times; ++k) out.insert(out.end(), seq.arr().begin(), seq.arr().end());
  return Value::array(std::move(out));
}

// "%s" % args, Python printf-style formatting for the conversions templates use (%s %d %i %r %f %%).
Value percent_format(const std::string& fmt, const Value& args, int line) {
  std::vector<Value> list = args.kind == K::kArray ? args.arr() : std::vector<Value>{args};
  size_t next = 0;
  std::string out;
  for (size_t k = 0; k < fmt.size(); ++k) {
    if (fmt[k] != '%') {
      out.push_back(fmt[k]);
      continue;
    }
    if (++k >= fmt.size()) fail(line, "incomplete format string");
    char c = fmt[k];
    if (c == '%') {
      out.push_back('%');
      continue;
    }
    if (next >= list.size()) fail(line, "not enough arguments for format string");
    const Value& v = list[next++];
    if (c == 's') out += v.to_str();
    else if (c == 'r') out += v.repr();
    else if (c == 'd' || c == 'i') {
      if (!is_numeric(v)) fail(line, std::string("%d format: a real number is required, not ") + v.type_name());
      out += std::to_string(v.kind == K::kFloat ? static_cast<int64_t>(v.f) : as_int(v));
    } else if (c == 'f') {
      if (!is_numeric(v)) fail(line, std::string("%f format: a real number is required, not ") + v.type_name());
      char buf[64];
      std::snprintf(buf, sizeof(buf), "%f", v.as_double());
      out += buf;
    } else {
      fail(line, std::string("unsupported format character '") + c + "'");
    }
  }
  if (next < list.size()) fail(line, "not all arguments converted during string formatting");
  return Value::string(std::move(out));
}

bool contains(const Value& container, const Value& item, int line) {
  switch (container.kind) {
    case K::kUndefined: return false;
    case K::kString:
      if (!item.is_string()) {
        fail(line, std::string("'in <string>' requires string as left operand, not ") + item.type_name());
      }
      return find_text(container.str(), item.str()) != std::string::npos;
    case K::kArray:
      for (const Value& v : container.arr())
        if (values_equal(v, item)) return true;
      return false;
    case K::kObject:
    case K::kNamespace:
      return item.is_string() && container.attrs().find(item.str()) != nullptr;
    default:
      fail(line, std::string("argument of type '") + container.type_name() + "' is not iterable");
  }
}

}  // namespace

std::string undefined_message(const Value& v) {
  if (v.s && !v.s->empty()) return "'" + *v.s + "' is undefined";
  return "value is undefined";
}

int compare_values(const Value& x, const Value& y, bool case_sensitive, int line) {
  if (is_numeric(x) && is_numeric(y)) {
    if (is_intlike(x) && is_intlike(y)) return as_int(x) < as_int(y) ? -1 : as_int(x) > as_int(y) ? 1 : 0;
    double a = x.as_double(), b = y.as_double();
    return a < b ? -1 : a > b ? 1 : 0;
  }
  if (x.is_string() && y.is_string()) {
    if (case_sensitive) return x.str().compare(y.str()) < 0 ? -1 : x.str() == y.str() ? 0 : 1;
    std::string a = apply_case(x.str(), 'l'), b = apply_case(y.str(), 'l');
    return a < b ? -1 : a > b ? 1 : 0;
  }
  if (x.is_array() && y.is_array()) {
    size_t n = std::min(x.arr().size(), y.arr().size());
    for (size_t k = 0; k < n; ++k) {
      if (values_equal(x.arr()[k], y.arr()[k])) continue;
      return compare_values(x.arr()[k], y.arr()[k], case_sensitive, line);
    }
    return x.arr().size() < y.arr().size() ? -1 : x.arr().size() > y.arr().size() ? 1 : 0;
  }
  if (x.is_undefined()) fail(line, undefined_message(x));
  if (y.is_undefined()) fail(line, undefined_message(y));
  fail(line, std::string("'<' not supported between instances of '") + x.type_name() + "' and '" + y.type_name() +
                 "'");
}

Value binary_op(Interpreter& interp, BinOp op, const Value& x, const Value& y, int line) {
  switch (op) {
    case BinOp::kEq: return Value::boolean(values_equal(x, y));
    case BinOp::kNe: return Value::boolean(!values_equal(x, y));
    case BinOp::kLt: return Value::boolean(compare_values(x, y, true, line) < 0);
    case BinOp::kLe: return Value::boolean(compare_values(x, y, true, line) <= 0);
    case BinOp::kGt: return Value::boolean(compare_values(x, y, true, line) > 0);
    case BinOp::kGe: return Value::boolean(compare_values(x, y, true, line) >= 0);
    case BinOp::kIn: return Value::boolean(contains(y, x, line));
    case BinOp::kNotIn: return Value::boolean(!contains(y, x, line));
    case BinOp::kConcat: {
      std::string a = x.to_str(), b = y.to_str();
      interp.check_string_size(a.size() + b.size(), line);
      return Value::string(a + b);
    }
    default: break;
  }
  if (is_intlike(x) && is_intlike(y)) {
    int64_t a = as_int(x), b = as_int(y);
    switch (op) {
      case BinOp::kAdd:
      case BinOp::kSub:
      case BinOp::kMul: return checked_int(op, a, b, line);
      case BinOp::kDiv:
        if (b == 0) fail(line, "division by zero");
        return Value::floating(static_cast<double>(a) / static_cast<double>(b));
      case BinOp::kFloorDiv:
      case BinOp::kMod: {
        if (b == 0) fail(line, "integer division or modulo by zero");
        if (a == INT64_MIN && b == -1) fail(line, "integer overflow");
        int64_t q = a / b, m = a % b;
        if (m != 0 && ((m < 0) != (b < 0))) {
          --q;
          m += b;
        }
        return Value::integer(op == BinOp::kFloorDiv ? q : m);
      }
      case BinOp::kPow: {
        if (b < 0) return Value::floating(std::pow(static_cast<double>(a), static_cast<double>(b)));
        int64_t acc = 1;
        for (int64_t k = 0; k < b; ++k) {
          if (__builtin_mul_overflow(acc, a, &acc)) fail(line, "integer overflow");
          if (acc == 0 || acc == 1) break;
        }
        if (acc == 1 && a == -1 && b % 2 == 1) acc = -1;
        return Value::integer(acc);
      }
      default: break;
    }
  }
  if (is_numeric(x) && is_numeric(y)) {
    double a = x.as_double(), b = y.as_double();
    switch (op) {
      case BinOp::kAdd: return Value::floating(a + b);
      case BinOp::kSub: return Value::floating(a - b);
      case BinOp::kMul: return Value::floating(a * b);
      case BinOp::kDiv:
        if (b == 0) fail(line, "float division by zero");
        return Value::floating(a / b);
      case BinOp::kFloorDiv:
        if (b == 0) fail(line, "float floor division by zero");
        return Value::floating(std::floor(a / b));
      case BinOp::kMod: {
        if (b == 0) fail(line, "float modulo");
        double m = std::fmod(a, b);
        if (m != 0 && ((m < 0) != (b < 0))) m += b;
        return Value::floating(m);
      }
      case BinOp::kPow: return Value::floating(std::pow(a, b));
      default: break;
    }
  }
  if (op == BinOp::kAdd && x.is_string() && y.is_string()) {
    interp.check_string_size(x.str().size() + y.str().size(), line);
    return Value::string(x.str() + y.str());
  }
  if (op == BinOp::kAdd && x.is_array() && y.is_array()) {
    Array out = x.arr();
    out.insert(out.end(), y.arr().begin(), y.arr().end());
    return Value::array(std::move(out));
  }
  if (op == BinOp::kMul && (x.is_string() || x.is_array()) && is_intlike(y)) return repeat(interp, x, as_int(y), line);
  if (op == BinOp::kMul && (y.is_string() || y.is_array()) && is_intlike(x)) return repeat(interp, y, as_int(x), line);
  if (op == BinOp::kMod && x.is_string()) return percent_format(x.str(), y, line);
  type_error(op, x, y, line);
}

Value negate(const Value& x, int line) {
  if (x.kind == K::kFloat) return Value::floating(-x.f);
  if (is_intlike(x)) {
    int64_t v = as_int(x);
    if (v == INT64_MIN) fail(line, "integer overflow");
    return Value::integer(-v);
  }
  if (x.is_undefined()) fail(line, undefined_message(x));
  fail(line, std::string("bad operand type for unary -: '") + x.type_name() + "'");
}

std::vector<Value> iterate(const Value& v, int line) {
  switch (v.kind) {
    case K::kUndefined: return {};
    case K::kArray: return v.arr();
    case K::kString: {
      std::vector<Value> out;
      for (auto& c : utf8_chars(v.str())) out.push_back(Value::string(std::move(c)));
      return out;
    }
    case K::kObject: {
      std::vector<Value> out;
      for (const auto& kv : v.attrs().items) out.push_back(Value::string(kv.first));
      return out;
    }
    default:
      fail(line, std::string("'") + v.type_name() + "' object is not iterable");
  }
}

}  // namespace rl::jinja
