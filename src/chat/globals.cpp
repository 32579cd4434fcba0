// The global functions a chat template sees: jinja2's range, namespace and dict, and transformers'
// raise_exception and strftime_now.
#include <cmath>
#include <ctime>
#include <string>

#include "chat/builtins.h"
#include "chat/interpreter.h"
#include "chat/template_error.h"

namespace rl::jinja {

namespace {

Value make_range(Interpreter& interp, const CallArgs& args) {
  std::vector<int64_t> p;
  for (const Value& v : args.positional) {
    if (v.kind != Value::Kind::kInt && v.kind != Value::Kind::kBool) {
      fail(args.line, std::string("range() arguments must be integers, got '") + v.type_name() + "'");
    }
    p.push_back(v.kind == Value::Kind::kBool ? v.b : v.i);
  }
  if (p.empty() || p.size() > 3) fail(args.line, "range() takes 1 to 3 arguments");
  int64_t start = p.size() == 1 ? 0 : p[0];
  int64_t stop = p.size() == 1 ? p[0] : p[1];
  int64_t step = p.size() == 3 ? p[2] : 1;
  if (step == 0) fail(args.line, "range() arg 3 must not be zero");
  // Count before allocating: a huge range is a loop-limit error, not an out-of-memory.
  long double span = (static_cast<long double>(stop) - static_cast<long double>(start)) / static_cast<long double>(step);
  int64_t n = span <= 0 ? 0 : static_cast<int64_t>(std::ceil(static_cast<double>(span)));
  interp.count_iterations(n, args.line);
  Array out;
  out.reserve(static_cast<size_t>(n));
  for (int64_t k = 0; k < n; ++k) out.push_back(Value::integer(start + k * step));
  return Value::array(std::move(out));
}

Object collect_mapping(const CallArgs& args, const char* fn) {
  Object o;
  if (args.positional.size() > 1) fail(args.line, std::string(fn) + "() takes at most 1 positional argument");
  if (!args.positional.empty()) {
    const Value& src = args.positional[0];
    if (src.has_attributes()) {
      for (const auto& kv : src.attrs().items) o.set(kv.first, kv.second);
    } else if (src.is_array()) {
      for (const Value& pair : src.arr()) {
        if (!pair.is_array() || pair.arr().size() != 2 || !pair.arr()[0].is_string()) {
          fail(args.line, std::string(fn) + "() expects (key, value) pairs with string keys");
        }
        o.set(pair.arr()[0].str(), pair.arr()[1]);
      }
    } else {
      fail(args.line, std::string(fn) + "() argument must be a mapping or a list of pairs");
    }
  }
  for (const auto& kv : args.keyword) o.set(kv.first, kv.second);
  return o;
}

void add(Object* globals, const std::string& name, NativeFunction::Fn fn) {
  globals->set(name, Value::callable(std::make_shared<NativeFunction>(name, std::move(fn))));
}

}  // namespace

std::string format_strftime(const std::string& fmt, int64_t unix_seconds, bool local_time) {
  std::time_t t = static_cast<std::time_t>(unix_seconds);
  std::tm tm{};
  if (local_time) localtime_r(&t, &tm);
  else gmtime_r(&t, &tm);
  if (fmt.empty()) return "";
  std::string buf(fmt.size() * 8 + 64, '\0');
  size_t n = std::strftime(buf.data(), buf.size(), fmt.c_str(), &tm);
  buf.resize(n);
  return buf;
}

void add_builtin_globals(Object* globals) {
  add(globals, "range", make_range);
  add(globals, "namespace", [](Interpreter& interp, const CallArgs& args) {
    Value ns = Value::namespace_(collect_mapping(args, "namespace"));
    interp.track_namespace(ns);
    return ns;
  });
  add(globals, "dict", [](Interpreter&, const CallArgs& args) { return Value::object(collect_mapping(args, "dict")); });
  add(globals, "raise_exception", [](Interpreter&, const CallArgs& args) -> Value {
    const Value* msg = args.get(0, "message");
    fail(args.line, msg != nullptr ? msg->to_str() : std::string("raise_exception() called"));
  });
  add(globals, "strftime_now", [](Interpreter& interp, const CallArgs& args) {
    const Value* fmt = args.get(0, "format");
    if (fmt == nullptr || !fmt->is_string()) fail(args.line, "strftime_now() needs a format string");
    if (fmt->str().size() > 4096) fail(args.line, "strftime_now() format longer than 4096 bytes");
    int64_t now = interp.options().now_unix_seconds;
    bool local = now < 0;
    if (local) now = static_cast<int64_t>(std::time(nullptr));
    return Value::string(format_strftime(fmt->str(), now, local));
  });
}

}  // namespace rl::jinja
