// jinja2's builtin tests (`x is defined`, `n is divisibleby 3`, ...), with Python semantics.
#include <string>

#include "chat/builtins.h"
#include "chat/interpreter.h"
#include "chat/template_error.h"

namespace rl::jinja {

namespace {

using K = Value::Kind;

const Value& need_arg(const CallArgs& args, const std::string& test) {
  const Value* v = args.get(0, "");
  if (v == nullptr) fail(args.line, "test '" + test + "' needs an argument");
  return *v;
}

int64_t need_int(const Value& v, const std::string& test, int line) {
  if (v.kind == K::kInt) return v.i;
  if (v.kind == K::kBool) return v.b;
  fail(line, "test '" + test + "' needs an integer, got '" + std::string(v.type_name()) + "'");
}

}  // namespace

bool apply_test(Interpreter& interp, const std::string& name, const Value& v, const CallArgs& args, int line) {
  (void)interp;
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "none") return v.is_none();
  if (name == "string") return v.is_string();
  if (name == "number") return v.is_number() || v.kind == K::kBool;
  if (name == "integer") return v.kind == K::kInt;
  if (name == "float") return v.kind == K::kFloat;
  if (name == "boolean") return v.kind == K::kBool;
  if (name == "true") return v.kind == K::kBool && v.b;
  if (name == "false") return v.kind == K::kBool && !v.b;
  if (name == "mapping") return v.kind == K::kObject;
  if (name == "iterable") return v.is_string() || v.is_array() || v.kind == K::kObject || v.is_undefined();
  if (name == "sequence") return v.is_string() || v.is_array() || v.kind == K::kObject || v.is_undefined();
  if (name == "callable") return v.kind == K::kCallable;
  if (name == "odd") return need_int(v, name, line) % 2 != 0;
  if (name == "even") return need_int(v, name, line) % 2 == 0;
  if (name == "divisibleby") {
    int64_t d = need_int(need_arg(args, name), name, line);
    if (d == 0) fail(line, "divisibleby 0");
    return need_int(v, name, line) % d == 0;
  }
  if (name == "lower" || name == "upper") {
    std::string s = v.to_str();
    return s == apply_case(s, name == "lower" ? 'l' : 'u');
  }
  if (name == "equalto" || name == "eq" || name == "==") return values_equal(v, need_arg(args, name));
  if (name == "ne" || name == "!=") return !values_equal(v, need_arg(args, name));
  if (name == "sameas") {
    const Value& o = need_arg(args, name);
    return v.kind == o.kind && values_equal(v, o);
  }
  if (name == "lt" || name == "lessthan" || name == "<") return compare_values(v, need_arg(args, name), true, line) < 0;
  if (name == "le" || name == "<=") return compare_values(v, need_arg(args, name), true, line) <= 0;
  if (name == "gt" || name == "greaterthan" || name == ">") return compare_values(v, need_arg(args, name), true, line) > 0;
  if (name == "ge" || name == ">=") return compare_values(v, need_arg(args, name), true, line) >= 0;
  if (name == "in") return binary_op(interp, BinOp::kIn, v, need_arg(args, name), line).b;
  fail(line, "unknown test '" + name + "'");
}

}  // namespace rl::jinja
