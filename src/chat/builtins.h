// The builtin vocabulary of the engine: operators, attribute/item access, filters, tests, methods of str and
// dict, and the global functions transformers provides. Each follows jinja2 (Python) semantics; every unknown
// name is an error that names it.
#pragma once

#include <string>
#include <vector>

#include "chat/ast.h"
#include "chat/callable.h"
#include "chat/value.h"

namespace rl::jinja {

class Interpreter;

// operators.cpp
Value binary_op(Interpreter& interp, BinOp op, const Value& x, const Value& y, int line);
Value negate(const Value& x, int line);
// Python iteration: list items, dict keys, str characters; Undefined iterates as empty (jinja2's Undefined).
std::vector<Value> iterate(const Value& v, int line);
// Python ordering for sort/min/max/< : numbers, strings, lists; -1, 0, 1. Throws on incomparable types.
int compare_values(const Value& x, const Value& y, bool case_sensitive, int line);
// The message for using an undefined value where jinja2 rejects it: "'name' is undefined".
std::string undefined_message(const Value& v);

// methods.cpp: obj.name (jinja2 tries the attribute first, then the item) and obj[key].
Value get_attr(const Value& obj, const std::string& name);
Value get_item(const Value& obj, const Value& key, int line);
// obj[start:stop:step] on a list or str (None = omitted), with Python's clamping and negative steps.
Value slice_value(const Value& obj, const Value& start, const Value& stop, const Value& step, int line);
std::string apply_case(const std::string& s, char mode);  // 'u' upper, 'l' lower, 't' title, 'c' capitalize

// filters.cpp / tests.cpp
Value apply_filter(Interpreter& interp, const std::string& name, const Value& operand, const CallArgs& args,
                   int line);
bool apply_test(Interpreter& interp, const std::string& name, const Value& operand, const CallArgs& args, int line);

// globals.cpp: range, namespace, dict, raise_exception, strftime_now.
void add_builtin_globals(Object* globals);
std::string format_strftime(const std::string& fmt, int64_t unix_seconds, bool local_time);

}  // namespace rl::jinja
