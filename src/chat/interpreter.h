// Renders a parsed template. One Interpreter per render: it owns the scopes, the output and the counters that
// enforce the sandbox limits, so concurrent renders of one parsed template share nothing mutable.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "chat/ast.h"
#include "chat/callable.h"
#include "chat/value.h"

namespace rl::jinja {

// Bounds that keep a hostile template from hanging or exhausting memory or the stack.
struct RenderLimits {
  size_t max_output_bytes = 32u << 20;       // also bounds every string the template builds
  int64_t max_loop_iterations = 5'000'000;   // summed over all loops (and range() sizes) of one render
  int max_call_depth = 64;                   // nested macro calls (recursion)
  // Nested evaluations of expressions and statements together, across macro calls: bounds the native stack.
  int max_eval_depth = 400;
  // Work of one render: every operator, filter, test, call, subscript and literal charges the sizes (bytes of a
  // string; 32 per list element, 64 per dict item) of its operands and its result. Keeps repeated whole-value operations
  // (`ns.s = ns.s ~ 'x'` a million times) linear in this budget instead of quadratic in time.
  int64_t max_work = int64_t{1} << 30;
};

struct RenderOptions {
  int64_t now_unix_seconds = -1;  // strftime_now's clock: < 0 = the local time now; >= 0 = that instant, in UTC
};

// A scope: variables set here shadow the parent's. jinja2 gives each for-loop iteration and each macro call its
// own scope; if-blocks share their enclosing one.
struct Frame {
  std::unordered_map<std::string, Value> vars;
  std::shared_ptr<Frame> parent;
};

class Interpreter {
 public:
  Interpreter(const RenderLimits& limits, const RenderOptions& options);

  // Renders with `globals` (messages, special tokens, kwargs...) as the outermost scope. Throws TemplateError.
  std::string render(const Body& program, const Object& globals);

  // Used by builtins and callables.
  Value call(const Value& fn, const CallArgs& args, int line);
  Value call_macro(const Stmt& macro, const std::shared_ptr<Frame>& closure, const CallArgs& args,
                   const Value* caller);
  Value call_block(const Stmt& block, const std::shared_ptr<Frame>& frame, const CallArgs& args);
  void check_string_size(size_t bytes, int line) const;
  void count_iterations(int64_t n, int line);
  void charge_work(int64_t units, int line);
  const RenderOptions& options() const { return options_; }
  // A namespace is the one mutable value: `{% set ns.me = ns %}` makes a reference cycle. render() empties every
  // namespace it created when it ends, which breaks such cycles (nothing made by a render outlives it).
  void track_namespace(const Value& ns);
  std::shared_ptr<Frame> root() const { return root_; }

 private:
  enum class Flow { kNormal, kBreak, kContinue };

  Flow exec_body(const Body& body, const std::shared_ptr<Frame>& frame, std::string* out);
  Flow exec(const Stmt& st, const std::shared_ptr<Frame>& frame, std::string* out);
  Flow exec_stmt(const Stmt& st, const std::shared_ptr<Frame>& frame, std::string* out);
  void exec_for(const Stmt& st, const std::shared_ptr<Frame>& frame, std::string* out);
  void exec_set(const Stmt& st, const std::shared_ptr<Frame>& frame);
  Value eval(const Expr& e, const std::shared_ptr<Frame>& frame);
  Value eval_expr(const Expr& e, const std::shared_ptr<Frame>& frame);
  struct DepthGuard;
  CallArgs eval_args(const ArgExprs& args, const std::shared_ptr<Frame>& frame, int line);
  Value lookup(const std::string& name, const Frame& frame) const;
  void append(std::string* out, const std::string& s, int line) const;
  void bind_targets(const std::vector<std::string>& targets, const Value& v, Frame* frame, int line) const;
  Value apply_filters(const std::vector<FilterCall>& filters, Value v, const std::shared_ptr<Frame>& frame);

  RenderLimits limits_;
  RenderOptions options_;
  std::shared_ptr<Frame> root_;
  std::vector<std::weak_ptr<Object>> namespaces_;
  int64_t iterations_ = 0;
  int64_t work_ = 0;
  int call_depth_ = 0;
  int eval_depth_ = 0;
};

}  // namespace rl::jinja
