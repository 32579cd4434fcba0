#include "chat/interpreter.h"

#include <algorithm>
#include <utility>

#include "chat/builtins.h"
#include "chat/template_error.h"

namespace rl::jinja {

namespace {

// A macro value: the definition plus the scope it was defined in (held weakly: a macro stored in a namespace can
// outlive a loop scope; it then falls back to the template's top-level scope).
class Macro : public Callable {
 public:
  Macro(const Stmt* def, std::weak_ptr<Frame> closure) : def_(def), closure_(std::move(closure)) {}
  std::string name() const override { return def_->name; }
  Value call(Interpreter& interp, const CallArgs& args) const override {
    std::shared_ptr<Frame> closure = closure_.lock();
    return interp.call_macro(*def_, closure ? closure : interp.root(), args, nullptr);
  }

 private:
  const Stmt* def_;
  std::weak_ptr<Frame> closure_;
};

// `caller` inside a macro invoked by {% call %}: renders the call block's body.
class CallerBlock : public Callable {
 public:
  CallerBlock(const Stmt* block, std::weak_ptr<Frame> frame) : block_(block), frame_(std::move(frame)) {}
  std::string name() const override { return "caller"; }
  Value call(Interpreter& interp, const CallArgs& args) const override {
    std::shared_ptr<Frame> frame = frame_.lock();
    return interp.call_block(*block_, frame ? frame : interp.root(), args);
  }

 private:
  const Stmt* block_;
  std::weak_ptr<Frame> frame_;
};

// The size a value stands for in the work budget (RenderLimits::max_work), in units of about one byte copied:
// a string costs its bytes; a list or dict element costs more (a Value copy is reference counts and ~100 bytes).
int64_t weight(const Value& v) {
  switch (v.kind) {
    case Value::Kind::kString: return static_cast<int64_t>(v.str().size());
    case Value::Kind::kArray: return 32 * static_cast<int64_t>(v.arr().size());
    case Value::Kind::kObject:
    case Value::Kind::kNamespace: return 64 * static_cast<int64_t>(v.attrs().items.size());
    default: return 0;
  }
}

std::shared_ptr<Frame> child_frame(const std::shared_ptr<Frame>& parent) {
  auto f = std::make_shared<Frame>();
  f->parent = parent;
  return f;
}

}  // namespace

Interpreter::Interpreter(const RenderLimits& limits, const RenderOptions& options)
    : limits_(limits), options_(options) {}

std::string Interpreter::render(const Body& program, const Object& globals) {
  // Empties the namespaces of this render however it ends (see track_namespace).
  struct NamespaceSweep {
    std::vector<std::weak_ptr<Object>>* namespaces;
    ~NamespaceSweep() {
      for (auto& w : *namespaces) {
        if (std::shared_ptr<Object> ns = w.lock()) {
          std::vector<std::pair<std::string, Value>> items = std::move(ns->items);
          ns->clear();
        }  // items die here, outside the namespace: a cycle through it is broken first
      }
      namespaces->clear();
    }
  } sweep{&namespaces_};
  auto global_frame = std::make_shared<Frame>();
  for (const auto& kv : globals.items) global_frame->vars[kv.first] = kv.second;
  root_ = child_frame(global_frame);
  std::string out;
  exec_body(program, root_, &out);
  root_.reset();
  return out;
}

void Interpreter::track_namespace(const Value& ns) {
  if (ns.kind == Value::Kind::kNamespace) namespaces_.push_back(ns.ns);
}

void Interpreter::check_string_size(size_t bytes, int line) const {
  if (bytes > limits_.max_output_bytes) {
    fail(line, "output limit exceeded: a string or the output grew past " + std::to_string(limits_.max_output_bytes) +
                   " bytes");
  }
}

void Interpreter::count_iterations(int64_t n, int line) {
  iterations_ += n;
  if (iterations_ > limits_.max_loop_iterations) {
    fail(line, "loop limit exceeded: more than " + std::to_string(limits_.max_loop_iterations) +
                   " loop iterations in one render");
  }
}

void Interpreter::charge_work(int64_t units, int line) {
  work_ += units;
  if (work_ > limits_.max_work) {
    fail(line, "work limit exceeded: the template touched more than " + std::to_string(limits_.max_work) +
                   " bytes and elements in one render");
  }
}

// Bounds the recursion of exec and eval together (RenderLimits::max_eval_depth).
struct Interpreter::DepthGuard {
  Interpreter* interp;
  DepthGuard(Interpreter* i, int line) : interp(i) {
    if (++interp->eval_depth_ > interp->limits_.max_eval_depth) {
      --interp->eval_depth_;
      fail(line, "evaluation nested too deeply: more than " + std::to_string(interp->limits_.max_eval_depth) +
                     " levels of statements, expressions and macro calls");
    }
  }
  ~DepthGuard() { --interp->eval_depth_; }
};

void Interpreter::append(std::string* out, const std::string& s, int line) const {
  check_string_size(out->size() + s.size(), line);
  out->append(s);
}

Interpreter::Flow Interpreter::exec_body(const Body& body, const std::shared_ptr<Frame>& frame, std::string* out) {
  for (const auto& st : body) {
    Flow f = exec(*st, frame, out);
    if (f != Flow::kNormal) return f;
  }
  return Flow::kNormal;
}

Interpreter::Flow Interpreter::exec(const Stmt& st, const std::shared_ptr<Frame>& frame, std::string* out) {
  DepthGuard guard(this, st.line);
  try {
    return exec_stmt(st, frame, out);
  } catch (const TemplateError& e) {
    if (e.line() > 0) throw;
    fail(st.line, e.message());  // errors raised by values (nesting limits) get the statement's line
  }
}

Interpreter::Flow Interpreter::exec_stmt(const Stmt& st, const std::shared_ptr<Frame>& frame, std::string* out) {
  switch (st.kind) {
    case Stmt::Kind::kText:
      append(out, st.text, st.line);
      return Flow::kNormal;
    case Stmt::Kind::kPrint:
      append(out, eval(*st.expr, frame).to_str(), st.line);
      return Flow::kNormal;
    case Stmt::Kind::kIf:
      for (const auto& branch : st.branches) {
        if (eval(*branch.first, frame).truthy()) return exec_body(branch.second, frame, out);
      }
      return exec_body(st.else_body, frame, out);
    case Stmt::Kind::kFor:
      exec_for(st, frame, out);
      return Flow::kNormal;
    case Stmt::Kind::kSet:
      exec_set(st, frame);
      return Flow::kNormal;
    case Stmt::Kind::kSetBlock: {
      std::string body;
      exec_body(st.body, frame, &body);
      frame->vars[st.targets[0]] = apply_filters(st.filters, Value::string(std::move(body)), frame);
      return Flow::kNormal;
    }
    case Stmt::Kind::kMacro:
      frame->vars[st.name] = Value::callable(std::make_shared<Macro>(&st, frame));
      return Flow::kNormal;
    case Stmt::Kind::kCallBlock: {
      const Expr& call_expr = *st.expr;
      Value fn = eval(*call_expr.a, frame);
      CallArgs args = eval_args(call_expr.args, frame, call_expr.line);
      // The macro binds this keyword to its `caller` variable.
      args.keyword.emplace_back("caller", Value::callable(std::make_shared<CallerBlock>(&st, frame)));
      append(out, call(fn, args, call_expr.line).to_str(), st.line);
      return Flow::kNormal;
    }
    case Stmt::Kind::kFilterBlock: {
      std::string body;
      exec_body(st.body, frame, &body);
      append(out, apply_filters(st.filters, Value::string(std::move(body)), frame).to_str(), st.line);
      return Flow::kNormal;
    }
    case Stmt::Kind::kScope:
      return exec_body(st.body, frame, out);
    case Stmt::Kind::kBreak:
      return Flow::kBreak;
    case Stmt::Kind::kContinue:
      return Flow::kContinue;
  }
  return Flow::kNormal;
}

void Interpreter::bind_targets(const std::vector<std::string>& targets, const Value& v, Frame* frame,
                               int line) const {
  if (targets.size() == 1) {
    frame->vars[targets[0]] = v;
    return;
  }
  std::vector<Value> parts = iterate(v, line);
  if (parts.size() != targets.size()) {
    fail(line, std::string(parts.size() < targets.size() ? "not enough" : "too many") + " values to unpack (expected " +
                   std::to_string(targets.size()) + ", got " + std::to_string(parts.size()) + ")");
  }
  for (size_t k = 0; k < targets.size(); ++k) frame->vars[targets[k]] = parts[k];
}

void Interpreter::exec_for(const Stmt& st, const std::shared_ptr<Frame>& frame, std::string* out) {
  Value iterable = eval(*st.expr, frame);
  if (iterable.kind == Value::Kind::kNone || iterable.kind == Value::Kind::kInt ||
      iterable.kind == Value::Kind::kFloat || iterable.kind == Value::Kind::kBool) {
    fail(st.line, std::string("'") + iterable.type_name() + "' object is not iterable");
  }
  // A string is counted before it is split into characters (a 32 MB string would be 32M values).
  if (iterable.is_string()) count_iterations(static_cast<int64_t>(utf8_length(iterable.str())), st.line);
  std::vector<Value> items = iterate(iterable, st.line);
  if (!iterable.is_string()) count_iterations(static_cast<int64_t>(items.size()), st.line);
  if (st.cond) {
    std::vector<Value> kept;
    for (const Value& item : items) {
      auto probe = child_frame(frame);
      bind_targets(st.targets, item, probe.get(), st.line);
      if (eval(*st.cond, probe).truthy()) kept.push_back(item);
    }
    items = std::move(kept);
  }
  if (items.empty()) {
    exec_body(st.else_body, frame, out);
    return;
  }
  const int64_t n = static_cast<int64_t>(items.size());
  for (int64_t k = 0; k < n; ++k) {
    auto iter_frame = child_frame(frame);
    bind_targets(st.targets, items[k], iter_frame.get(), st.line);
    if (!st.uses_loop) {
      if (exec_body(st.body, iter_frame, out) == Flow::kBreak) break;
      continue;
    }
    Object loop;
    loop.set("index", Value::integer(k + 1));
    loop.set("index0", Value::integer(k));
    loop.set("revindex", Value::integer(n - k));
    loop.set("revindex0", Value::integer(n - k - 1));
    loop.set("first", Value::boolean(k == 0));
    loop.set("last", Value::boolean(k == n - 1));
    loop.set("length", Value::integer(n));
    loop.set("depth", Value::integer(1));
    loop.set("depth0", Value::integer(0));
    loop.set("previtem", k > 0 ? items[k - 1] : Value::undefined("loop.previtem"));
    loop.set("nextitem", k + 1 < n ? items[k + 1] : Value::undefined("loop.nextitem"));
    loop.set("cycle", Value::callable(std::make_shared<NativeFunction>(
                          "loop.cycle", [k](Interpreter&, const CallArgs& args) {
                            if (args.positional.empty()) fail(args.line, "loop.cycle() needs at least one value");
                            return args.positional[static_cast<size_t>(k) % args.positional.size()];
                          })));
    iter_frame->vars["loop"] = Value::object(std::move(loop));
    if (exec_body(st.body, iter_frame, out) == Flow::kBreak) break;
  }
}

void Interpreter::exec_set(const Stmt& st, const std::shared_ptr<Frame>& frame) {
  Value v = eval(*st.expr, frame);
  if (st.attr_set) {
    Value target = lookup(st.targets[0], *frame);
    if (target.kind != Value::Kind::kNamespace) {
      fail(st.line, "cannot assign attribute '" + st.targets[1] + "' on '" + st.targets[0] +
                        "': only a namespace() object accepts attribute assignment");
    }
    target.ns->set(st.targets[1], std::move(v));
    return;
  }
  bind_targets(st.targets, v, frame.get(), st.line);
}

Value Interpreter::apply_filters(const std::vector<FilterCall>& filters, Value v, const std::shared_ptr<Frame>& frame) {
  for (const FilterCall& f : filters) {
    CallArgs args = eval_args(f.args, frame, f.line);
    v = apply_filter(*this, f.name, v, args, f.line);
  }
  return v;
}

Value Interpreter::lookup(const std::string& name, const Frame& frame) const {
  for (const Frame* f = &frame; f != nullptr; f = f->parent.get()) {
    auto it = f->vars.find(name);
    if (it != f->vars.end()) return it->second;
  }
  return Value::undefined(name);
}

CallArgs Interpreter::eval_args(const ArgExprs& args, const std::shared_ptr<Frame>& frame, int line) {
  CallArgs out;
  out.line = line;
  charge_work(static_cast<int64_t>(args.positional.size() + args.keyword.size()), line);
  for (const auto& e : args.positional) out.positional.push_back(eval(*e, frame));
  if (args.star) {
    for (Value& v : iterate(eval(*args.star, frame), line)) out.positional.push_back(std::move(v));
  }
  for (const auto& kv : args.keyword) out.keyword.emplace_back(kv.first, eval(*kv.second, frame));
  if (args.double_star) {
    Value d = eval(*args.double_star, frame);
    if (!d.has_attributes()) fail(line, "argument after ** must be a mapping");
    for (const auto& kv : d.attrs().items) out.keyword.push_back(kv);
  }
  return out;
}

Value Interpreter::call(const Value& fn, const CallArgs& args, int line) {
  if (fn.kind == Value::Kind::kCallable) return fn.fn->call(*this, args);
  if (fn.is_undefined()) fail(line, undefined_message(fn) + " (called as a function)");
  fail(line, std::string("'") + fn.type_name() + "' object is not callable");
}

Value Interpreter::call_macro(const Stmt& macro, const std::shared_ptr<Frame>& closure, const CallArgs& args,
                              const Value* caller) {
  if (call_depth_ >= limits_.max_call_depth) {
    fail(args.line, "recursion limit exceeded: more than " + std::to_string(limits_.max_call_depth) +
                        " nested macro calls");
  }
  auto frame = child_frame(closure);
  Array varargs;
  for (size_t k = 0; k < args.positional.size(); ++k) {
    if (k < macro.params.size()) frame->vars[macro.params[k]] = args.positional[k];
    else varargs.push_back(args.positional[k]);
  }
  Object kwargs;
  for (const auto& kv : args.keyword) {
    auto it = std::find(macro.params.begin(), macro.params.end(), kv.first);
    if (it != macro.params.end()) {
      if (static_cast<size_t>(it - macro.params.begin()) < args.positional.size()) {
        fail(args.line, "macro '" + macro.name + "' got multiple values for argument '" + kv.first + "'");
      }
      frame->vars[kv.first] = kv.second;
    } else if (kv.first == "caller") {
      frame->vars["caller"] = kv.second;
    } else {
      kwargs.set(kv.first, kv.second);
    }
  }
  for (size_t k = 0; k < macro.params.size(); ++k) {
    if (frame->vars.count(macro.params[k]) != 0) continue;
    frame->vars[macro.params[k]] =
        macro.defaults[k] ? eval(*macro.defaults[k], frame) : Value::undefined(macro.params[k]);
  }
  frame->vars["varargs"] = Value::tuple_of(std::move(varargs));
  frame->vars["kwargs"] = Value::object(std::move(kwargs));
  if (caller != nullptr) frame->vars["caller"] = *caller;
  ++call_depth_;
  std::string out;
  try {
    exec_body(macro.body, frame, &out);
  } catch (...) {
    --call_depth_;
    throw;
  }
  --call_depth_;
  return Value::string(std::move(out));
}

Value Interpreter::call_block(const Stmt& block, const std::shared_ptr<Frame>& frame, const CallArgs& args) {
  if (call_depth_ >= limits_.max_call_depth) {
    fail(args.line, "recursion limit exceeded: more than " + std::to_string(limits_.max_call_depth) +
                        " nested macro calls");
  }
  auto inner = child_frame(frame);
  for (size_t k = 0; k < block.params.size(); ++k) {
    const Value* v = args.get(k, block.params[k]);
    inner->vars[block.params[k]] =
        v != nullptr ? *v : block.defaults[k] ? eval(*block.defaults[k], inner) : Value::undefined(block.params[k]);
  }
  ++call_depth_;
  std::string out;
  try {
    exec_body(block.body, inner, &out);
  } catch (...) {
    --call_depth_;
    throw;
  }
  --call_depth_;
  return Value::string(std::move(out));
}

Value Interpreter::eval(const Expr& e, const std::shared_ptr<Frame>& frame) {
  DepthGuard guard(this, e.line);
  Value v = eval_expr(e, frame);
  // Names and literals are O(1); everything else pays for the size of what it produced, and (below) for the
  // operands it reads whole.
  if (e.kind != Expr::Kind::kName && e.kind != Expr::Kind::kLiteral) charge_work(1 + weight(v), e.line);
  return v;
}

Value Interpreter::eval_expr(const Expr& e, const std::shared_ptr<Frame>& frame) {
  switch (e.kind) {
    case Expr::Kind::kLiteral:
      return e.literal;
    case Expr::Kind::kName:
      return lookup(e.name, *frame);
    case Expr::Kind::kAttr: {
      Value obj = eval(*e.a, frame);
      Value attr = get_attr(obj, e.name);
      // A method taken from the object (s.split, d.items) reads it whole when called.
      if (attr.kind == Value::Kind::kCallable) charge_work(weight(obj), e.line);
      return attr;
    }
    case Expr::Kind::kItem: {
      Value obj = eval(*e.a, frame);
      if (obj.is_string()) charge_work(weight(obj), e.line);  // indexing by code point scans the string
      return get_item(obj, eval(*e.b, frame), e.line);
    }
    case Expr::Kind::kSlice: {
      Value obj = eval(*e.a, frame);
      if (obj.is_string()) charge_work(weight(obj), e.line);
      Value parts[3];
      const ExprPtr* exprs[3] = {&e.b, &e.c, &e.d};
      for (int k = 0; k < 3; ++k) {
        parts[k] = *exprs[k] ? eval(**exprs[k], frame) : Value::none();
      }
      return slice_value(obj, parts[0], parts[1], parts[2], e.line);
    }
    case Expr::Kind::kCall: {
      Value fn = eval(*e.a, frame);
      CallArgs args = eval_args(e.args, frame, e.line);
      return call(fn, args, e.line);
    }
    case Expr::Kind::kFilter: {
      Value operand = eval(*e.a, frame);
      CallArgs args = eval_args(e.args, frame, e.line);
      // Filters read their operand whole, except these O(1) ones on lists and dicts (common inside loops).
      const bool constant_time = !operand.is_string() && (e.name == "length" || e.name == "count" ||
                                                          e.name == "default" || e.name == "d");
      if (!constant_time) charge_work(weight(operand), e.line);
      return apply_filter(*this, e.name, operand, args, e.line);
    }
    case Expr::Kind::kTest: {
      Value operand = eval(*e.a, frame);
      CallArgs args = eval_args(e.args, frame, e.line);
      charge_work(weight(operand), e.line);
      return Value::boolean(apply_test(*this, e.name, operand, args, e.line) != e.negate);
    }
    case Expr::Kind::kBinary: {
      if (e.op == BinOp::kAnd) {
        Value l = eval(*e.a, frame);
        return l.truthy() ? eval(*e.b, frame) : l;
      }
      if (e.op == BinOp::kOr) {
        Value l = eval(*e.a, frame);
        return l.truthy() ? l : eval(*e.b, frame);
      }
      Value l = eval(*e.a, frame);
      Value r = eval(*e.b, frame);
      charge_work(weight(l) + weight(r), e.line);
      return binary_op(*this, e.op, l, r, e.line);
    }
    case Expr::Kind::kNot:
      return Value::boolean(!eval(*e.a, frame).truthy());
    case Expr::Kind::kNeg:
      return negate(eval(*e.a, frame), e.line);
    case Expr::Kind::kPos: {
      Value v = eval(*e.a, frame);
      if (!v.is_number() && v.kind != Value::Kind::kBool) {
        fail(e.line, std::string("bad operand type for unary +: '") + v.type_name() + "'");
      }
      return v.kind == Value::Kind::kBool ? Value::integer(v.b) : v;
    }
    case Expr::Kind::kCond:
      if (eval(*e.a, frame).truthy()) return eval(*e.b, frame);
      return e.c ? eval(*e.c, frame) : Value::undefined();
    case Expr::Kind::kList:
    case Expr::Kind::kTuple: {
      Array a;
      a.reserve(e.items.size());
      for (const auto& item : e.items) a.push_back(eval(*item, frame));
      return e.kind == Expr::Kind::kTuple ? Value::tuple_of(std::move(a)) : Value::array(std::move(a));
    }
    case Expr::Kind::kDict: {
      Object o;
      for (size_t k = 0; k + 1 < e.items.size(); k += 2) {
        Value key = eval(*e.items[k], frame);
        if (!key.is_string()) fail(e.line, "dict literal keys must be strings in chat templates");
        o.set(key.str(), eval(*e.items[k + 1], frame));
      }
      return Value::object(std::move(o));
    }
  }
  return Value::undefined();
}

}  // namespace rl::jinja
