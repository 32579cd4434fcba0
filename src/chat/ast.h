// The syntax tree of a parsed template. Immutable after parsing, so one tree serves concurrent renders.
// Every node carries the template line it came from, for error messages.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "chat/value.h"

namespace rl::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

// Call arguments as written: f(a, b, key=c, *rest, **more).
struct ArgExprs {
  std::vector<ExprPtr> positional;
  std::vector<std::pair<std::string, ExprPtr>> keyword;
  ExprPtr star;         // *args, may be null
  ExprPtr double_star;  // **kwargs, may be null
};

enum class BinOp { kAdd, kSub, kMul, kDiv, kFloorDiv, kMod, kPow, kConcat, kEq, kNe, kLt, kLe, kGt, kGe, kIn, kNotIn,
                   kAnd, kOr };

struct Expr {
  enum class Kind { kLiteral, kName, kAttr, kItem, kSlice, kCall, kFilter, kTest, kBinary, kNot, kNeg, kPos, kCond,
                    kList, kTuple, kDict };
  Kind kind;
  int line = 0;
  // 1 + the tallest operand, at most kMaxExprHeight (parser.h): bounds eval's recursion and the tree's teardown.
  int height = 1;

  Value literal;                 // kLiteral
  std::string name;              // kName, kAttr (attribute), kFilter / kTest (filter or test name)
  ExprPtr a, b, c, d;            // operands: object / left / test ... (see parser.cpp for each kind)
  BinOp op = BinOp::kAdd;        // kBinary
  bool negate = false;           // kTest: "is not"
  ArgExprs args;                 // kCall, kFilter, kTest
  std::vector<ExprPtr> items;    // kList, kTuple; kDict: key, value, key, value...
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

// A filter in a {% filter %} block or a chain: name plus its arguments.
struct FilterCall {
  std::string name;
  ArgExprs args;
  int line = 0;
};

struct Stmt {
  enum class Kind { kText, kPrint, kIf, kFor, kSet, kSetBlock, kMacro, kCallBlock, kFilterBlock, kBreak, kContinue,
                    kScope };
  Kind kind;
  int line = 0;

  std::string text;                  // kText
  ExprPtr expr;                      // kPrint; kFor: iterable; kSet: value; kCallBlock: the call
  ExprPtr cond;                      // kFor: "if" filter, may be null
  std::vector<std::string> targets;  // kFor / kSet / kSetBlock names; kSet on "ns.attr": {ns, attr} with attr_set
  bool attr_set = false;
  std::vector<std::pair<ExprPtr, Body>> branches;  // kIf: (condition, body)...
  Body body;                                       // kFor, kSetBlock, kMacro, kCallBlock, kFilterBlock, kScope
  Body else_body;                                  // kIf, kFor
  std::string name;                                // kMacro
  std::vector<std::string> params;                 // kMacro, kCallBlock (caller's parameters)
  std::vector<ExprPtr> defaults;                   // parallel to params; null = no default
  std::vector<FilterCall> filters;                 // kFilterBlock, kSetBlock
  // kFor: whether the body names `loop` anywhere (nested loops' bodies included, so it may be true needlessly,
  // never false wrongly); when false the interpreter builds no loop object per iteration.
  bool uses_loop = true;
};

}  // namespace rl::jinja
