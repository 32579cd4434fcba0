// Things a template can call: macros, builtin functions (range, namespace, raise_exception...) and bound methods
// ('x'.strip, d.items...). Arguments arrive already evaluated, positional then keyword, as in Python.
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "chat/value.h"

namespace rl::jinja {

class Interpreter;

struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
  int line = 0;  // of the call, for errors

  // The argument named `name` at position `pos` (or given by keyword); nullptr when absent.
  const Value* get(size_t pos, const std::string& name) const;
};

class Callable {
 public:
  virtual ~Callable() = default;
  virtual std::string name() const = 0;
  virtual Value call(Interpreter& interp, const CallArgs& args) const = 0;
};

// A builtin implemented in C++.
class NativeFunction : public Callable {
 public:
  using Fn = std::function<Value(Interpreter&, const CallArgs&)>;
  NativeFunction(std::string name, Fn fn) : name_(std::move(name)), fn_(std::move(fn)) {}
  std::string name() const override { return name_; }
  Value call(Interpreter& interp, const CallArgs& args) const override { return fn_(interp, args); }

 private:
  std::string name_;
  Fn fn_;
};

}  // namespace rl::jinja
