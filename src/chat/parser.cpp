#include "chat/parser.h"

#include <algorithm>
#include <utility>

#include "chat/lexer.h"
#include "chat/template_error.h"

namespace rl::jinja {

namespace {

bool is_op(const Token* t, const char* op) { return t != nullptr && t->kind == Token::Kind::kOp && t->text == op; }
bool is_name(const Token* t, const char* name) {
  return t != nullptr && t->kind == Token::Kind::kName && t->text == name;
}

ExprPtr make_expr(Expr::Kind kind, int line) {
  auto e = std::make_unique<Expr>();
  e->kind = kind;
  e->line = line;
  return e;
}

class Parser {
 public:
  explicit Parser(std::vector<Segment> segs) : segs_(std::move(segs)) {}

  Body parse() {
    std::string found;
    Body body = parse_body({}, "", 0, &found);
    return body;
  }

 private:
  // RAII guard on recursion depth.
  struct Nest {
    Parser* p;
    Nest(Parser* parser, int line) : p(parser) {
      if (++p->depth_ > kMaxParseNesting) fail(line, "template nested too deeply (limit " +
                                                          std::to_string(kMaxParseNesting) + ")");
    }
    ~Nest() { --p->depth_; }
  };

  // Every compound expression is sealed once its operands are attached: its height bounds eval's recursion and
  // the destruction of the tree. Chains built by the loops below (a + b + c ..., x|f|g ..., a.b.c ...) would
  // otherwise grow without bound while the recursion guard (Nest) sees one level.
  static ExprPtr seal(ExprPtr e) {
    int h = 0;
    const auto see = [&](const ExprPtr& c) {
      if (c) h = std::max(h, c->height);
    };
    see(e->a);
    see(e->b);
    see(e->c);
    see(e->d);
    for (const auto& i : e->items) see(i);
    for (const auto& i : e->args.positional) see(i);
    for (const auto& kv : e->args.keyword) see(kv.second);
    see(e->args.star);
    see(e->args.double_star);
    e->height = h + 1;
    if (e->height > kMaxExprHeight) {
      fail(e->line, "expression nested too deeply: more than " + std::to_string(kMaxExprHeight) +
                        " levels of operators, filters, tests, attributes, subscripts and calls");
    }
    return e;
  }

  // ---- token stream of the current tag ----
  const Token* peek(size_t ahead = 0) const {
    return tok_ + ahead < toks_->size() ? &(*toks_)[tok_ + ahead] : nullptr;
  }
  int line() const {
    const Token* t = peek();
    return t != nullptr ? t->line : seg_line_;
  }
  const Token& next(const char* what) {
    const Token* t = peek();
    if (t == nullptr) fail(seg_line_, std::string("unexpected end of tag, expected ") + what);
    ++tok_;
    return *t;
  }
  void expect_op(const char* op) {
    const Token* t = peek();
    if (!is_op(t, op)) fail(line(), std::string("expected '") + op + "'" + found_text(t));
    ++tok_;
  }
  std::string expect_name(const char* what) {
    const Token* t = peek();
    if (t == nullptr || t->kind != Token::Kind::kName) fail(line(), std::string("expected ") + what + found_text(t));
    ++tok_;
    return t->text;
  }
  void expect_end() {
    const Token* t = peek();
    if (t != nullptr) fail(t->line, "unexpected '" + t->text + "' at the end of the tag");
  }
  static std::string found_text(const Token* t) {
    return t == nullptr ? ", found the end of the tag" : ", found '" + t->text + "'";
  }
  void begin_segment(const Segment& s) {
    toks_ = &s.tokens;
    tok_ = 0;
    seg_line_ = s.line;
  }

  // ---- statements ----
  Body parse_body(const std::vector<std::string>& ends, const std::string& opener, int open_line, std::string* found) {
    Body body;
    while (seg_ < segs_.size()) {
      const Segment& s = segs_[seg_];
      if (s.kind == Segment::Kind::kText) {
        auto st = std::make_unique<Stmt>();
        st->kind = Stmt::Kind::kText;
        st->line = s.line;
        st->text = s.text;
        body.push_back(std::move(st));
        ++seg_;
        continue;
      }
      begin_segment(s);
      if (s.kind == Segment::Kind::kPrint) {
        auto st = std::make_unique<Stmt>();
        st->kind = Stmt::Kind::kPrint;
        st->line = s.line;
        st->expr = parse_tuple_expr();
        expect_end();
        body.push_back(std::move(st));
        ++seg_;
        continue;
      }
      std::string tag = expect_name("a tag name");
      if (std::find(ends.begin(), ends.end(), tag) != ends.end()) {
        *found = tag;
        return body;
      }
      body.push_back(parse_statement(tag, s.line));
    }
    if (!ends.empty()) {
      fail(open_line, "unclosed '{% " + opener + " %}': missing '{% " + ends.back() + " %}' before the end of the template");
    }
    return body;
  }

  // Finishes the end tag the body stopped at ({% endif %} ...) and moves past it.
  void close_tag() {
    expect_end();
    ++seg_;
  }

  StmtPtr parse_statement(const std::string& tag, int tag_line) {
    Nest nest(this, tag_line);
    auto st = std::make_unique<Stmt>();
    st->line = tag_line;
    std::string found;
    if (tag == "if") {
      st->kind = Stmt::Kind::kIf;
      ExprPtr cond = parse_tuple_expr();
      close_tag();
      while (true) {
        Body body = parse_body({"elif", "else", "endif"}, "if", tag_line, &found);
        st->branches.emplace_back(std::move(cond), std::move(body));
        if (found == "elif") {
          cond = parse_tuple_expr();
          close_tag();
          continue;
        }
        if (found == "else") {
          close_tag();
          st->else_body = parse_body({"endif"}, "if", tag_line, &found);
        }
        close_tag();
        break;
      }
    } else if (tag == "for") {
      st->kind = Stmt::Kind::kFor;
      st->targets = parse_target_names();
      if (!is_name(peek(), "in")) fail(line(), "expected 'in' in for loop" + found_text(peek()));
      ++tok_;
      st->expr = parse_tuple_expr(/*with_cond=*/false);
      if (is_name(peek(), "if")) {
        ++tok_;
        st->cond = parse_conditional();
      }
      if (is_name(peek(), "recursive")) fail(line(), "recursive for loops are not supported");
      close_tag();
      ++loop_depth_;
      const int64_t loop_refs_before = loop_refs_;
      st->body = parse_body({"else", "endfor"}, "for", tag_line, &found);
      st->uses_loop = loop_refs_ != loop_refs_before;
      --loop_depth_;
      if (found == "else") {
        close_tag();
        st->else_body = parse_body({"endfor"}, "for", tag_line, &found);
      }
      close_tag();
    } else if (tag == "set") {
      std::string first = expect_name("a variable name after 'set'");
      st->targets.push_back(first);
      if (is_op(peek(), ".")) {
        ++tok_;
        st->targets.push_back(expect_name("an attribute name"));
        st->attr_set = true;
      } else {
        while (is_op(peek(), ",")) {
          ++tok_;
          st->targets.push_back(expect_name("a variable name"));
        }
      }
      if (is_op(peek(), "=")) {
        ++tok_;
        st->kind = Stmt::Kind::kSet;
        st->expr = parse_tuple_expr();
        expect_end();
        ++seg_;
      } else {
        if (st->targets.size() != 1 || st->attr_set) fail(line(), "a block set assigns exactly one plain name");
        st->kind = Stmt::Kind::kSetBlock;
        while (is_op(peek(), "|")) {
          ++tok_;
          st->filters.push_back(parse_filter_call());
        }
        close_tag();
        st->body = parse_body({"endset"}, "set", tag_line, &found);
        close_tag();
      }
    } else if (tag == "macro") {
      st->kind = Stmt::Kind::kMacro;
      st->name = expect_name("a macro name");
      parse_params(st.get());
      close_tag();
      int saved = loop_depth_;
      loop_depth_ = 0;
      st->body = parse_body({"endmacro"}, "macro", tag_line, &found);
      loop_depth_ = saved;
      if (peek() != nullptr && peek()->kind == Token::Kind::kName) ++tok_;  // {% endmacro name %}
      close_tag();
    } else if (tag == "call") {
      st->kind = Stmt::Kind::kCallBlock;
      if (is_op(peek(), "(")) parse_params(st.get());
      st->expr = parse_conditional();
      if (st->expr->kind != Expr::Kind::kCall) fail(tag_line, "{% call %} needs a macro call, e.g. {% call m() %}");
      close_tag();
      int saved = loop_depth_;
      loop_depth_ = 0;
      st->body = parse_body({"endcall"}, "call", tag_line, &found);
      loop_depth_ = saved;
      close_tag();
    } else if (tag == "filter") {
      st->kind = Stmt::Kind::kFilterBlock;
      st->filters.push_back(parse_filter_call());
      while (is_op(peek(), "|")) {
        ++tok_;
        st->filters.push_back(parse_filter_call());
      }
      close_tag();
      st->body = parse_body({"endfilter"}, "filter", tag_line, &found);
      close_tag();
    } else if (tag == "generation") {
      // transformers' {% generation %} marks assistant text for masks; it renders its body unchanged.
      st->kind = Stmt::Kind::kScope;
      close_tag();
      st->body = parse_body({"endgeneration"}, "generation", tag_line, &found);
      close_tag();
    } else if (tag == "break" || tag == "continue") {
      if (loop_depth_ == 0) fail(tag_line, "'{% " + tag + " %}' outside a for loop");
      st->kind = tag == "break" ? Stmt::Kind::kBreak : Stmt::Kind::kContinue;
      close_tag();
    } else if (tag == "include" || tag == "import" || tag == "from" || tag == "extends" || tag == "block") {
      fail(tag_line, "'{% " + tag + " %}' is not allowed: chat templates are sandboxed and cannot load templates");
    } else if (tag.rfind("end", 0) == 0 || tag == "elif" || tag == "else") {
      fail(tag_line, "unexpected '{% " + tag + " %}' with no matching opening tag");
    } else {
      fail(tag_line, "unknown tag '" + tag + "'");
    }
    return st;
  }

  std::vector<std::string> parse_target_names() {
    std::vector<std::string> names;
    bool paren = is_op(peek(), "(");
    if (paren) ++tok_;
    names.push_back(expect_name("a loop variable name"));
    while (is_op(peek(), ",")) {
      ++tok_;
      names.push_back(expect_name("a loop variable name"));
    }
    if (paren) expect_op(")");
    return names;
  }

  // (a, b=default, ...) of a macro or a call block.
  void parse_params(Stmt* st) {
    expect_op("(");
    while (!is_op(peek(), ")")) {
      st->params.push_back(expect_name("a parameter name"));
      if (is_op(peek(), "=")) {
        ++tok_;
        st->defaults.push_back(parse_conditional());
      } else {
        st->defaults.push_back(nullptr);
      }
      if (!is_op(peek(), ",")) break;
      ++tok_;
    }
    expect_op(")");
  }

  FilterCall parse_filter_call() {
    FilterCall f;
    f.line = line();
    f.name = expect_name("a filter name");
    if (is_op(peek(), "(")) parse_call_args(&f.args);
    return f;
  }

  // ---- expressions ----
  // An expression, or a tuple when commas follow: `a, b`.
  ExprPtr parse_tuple_expr(bool with_cond = true) {
    int l = line();
    ExprPtr first = with_cond ? parse_conditional() : parse_or();
    if (!is_op(peek(), ",")) return first;
    auto t = make_expr(Expr::Kind::kTuple, l);
    t->items.push_back(std::move(first));
    while (is_op(peek(), ",")) {
      ++tok_;
      if (peek() == nullptr || is_name(peek(), "if")) break;
      t->items.push_back(with_cond ? parse_conditional() : parse_or());
    }
    return seal(std::move(t));
  }

  ExprPtr parse_conditional() {
    Nest nest(this, line());
    ExprPtr e = parse_or();
    while (is_name(peek(), "if")) {
      int l = line();
      ++tok_;
      auto c = make_expr(Expr::Kind::kCond, l);
      c->a = parse_or();
      c->b = std::move(e);
      if (is_name(peek(), "else")) {
        ++tok_;
        c->c = parse_conditional();
      }
      e = seal(std::move(c));
    }
    return e;
  }

  ExprPtr binary(BinOp op, ExprPtr l, ExprPtr r, int line) {
    auto e = make_expr(Expr::Kind::kBinary, line);
    e->op = op;
    e->a = std::move(l);
    e->b = std::move(r);
    return seal(std::move(e));
  }

  ExprPtr parse_or() {
    ExprPtr e = parse_and();
    while (is_name(peek(), "or")) {
      int l = line();
      ++tok_;
      e = binary(BinOp::kOr, std::move(e), parse_and(), l);
    }
    return e;
  }

  ExprPtr parse_and() {
    ExprPtr e = parse_not();
    while (is_name(peek(), "and")) {
      int l = line();
      ++tok_;
      e = binary(BinOp::kAnd, std::move(e), parse_not(), l);
    }
    return e;
  }

  ExprPtr parse_not() {
    if (is_name(peek(), "not")) {
      Nest nest(this, line());
      auto e = make_expr(Expr::Kind::kNot, line());
      ++tok_;
      e->a = parse_not();
      return seal(std::move(e));
    }
    return parse_compare();
  }

  ExprPtr parse_compare() {
    ExprPtr e = parse_math1();
    while (true) {
      const Token* t = peek();
      int l = line();
      BinOp op;
      if (is_op(t, "==")) op = BinOp::kEq;
      else if (is_op(t, "!=")) op = BinOp::kNe;
      else if (is_op(t, "<")) op = BinOp::kLt;
      else if (is_op(t, "<=")) op = BinOp::kLe;
      else if (is_op(t, ">")) op = BinOp::kGt;
      else if (is_op(t, ">=")) op = BinOp::kGe;
      else if (is_name(t, "in")) op = BinOp::kIn;
      else if (is_name(t, "not") && is_name(peek(1), "in")) op = BinOp::kNotIn;
      else break;
      tok_ += op == BinOp::kNotIn ? 2 : 1;
      e = binary(op, std::move(e), parse_math1(), l);
    }
    return e;
  }

  ExprPtr parse_math1() {
    ExprPtr e = parse_concat();
    while (is_op(peek(), "+") || is_op(peek(), "-")) {
      int l = line();
      BinOp op = next("operator").text == "+" ? BinOp::kAdd : BinOp::kSub;
      e = binary(op, std::move(e), parse_concat(), l);
    }
    return e;
  }

  ExprPtr parse_concat() {
    ExprPtr e = parse_math2();
    while (is_op(peek(), "~")) {
      int l = line();
      ++tok_;
      e = binary(BinOp::kConcat, std::move(e), parse_math2(), l);
    }
    return e;
  }

  ExprPtr parse_math2() {
    ExprPtr e = parse_pow();
    while (true) {
      const Token* t = peek();
      BinOp op;
      if (is_op(t, "*")) op = BinOp::kMul;
      else if (is_op(t, "/")) op = BinOp::kDiv;
      else if (is_op(t, "//")) op = BinOp::kFloorDiv;
      else if (is_op(t, "%")) op = BinOp::kMod;
      else break;
      int l = line();
      ++tok_;
      e = binary(op, std::move(e), parse_pow(), l);
    }
    return e;
  }

  ExprPtr parse_pow() {
    ExprPtr e = parse_unary(true);
    while (is_op(peek(), "**")) {
      int l = line();
      ++tok_;
      e = binary(BinOp::kPow, std::move(e), parse_unary(true), l);
    }
    return e;
  }

  ExprPtr parse_unary(bool with_filter) {
    Nest nest(this, line());
    ExprPtr e;
    if (is_op(peek(), "-") || is_op(peek(), "+")) {
      bool neg = peek()->text == "-";
      e = make_expr(neg ? Expr::Kind::kNeg : Expr::Kind::kPos, line());
      ++tok_;
      e->a = parse_unary(false);
      e = seal(std::move(e));
    } else {
      e = parse_primary();
    }
    e = parse_postfix(std::move(e));
    if (with_filter) e = parse_filter_expr(std::move(e));
    return e;
  }

  ExprPtr parse_primary() {
    const Token& t = next("an expression");
    switch (t.kind) {
      case Token::Kind::kName: {
        auto e = make_expr(Expr::Kind::kLiteral, t.line);
        if (t.text == "true" || t.text == "True") e->literal = Value::boolean(true);
        else if (t.text == "false" || t.text == "False") e->literal = Value::boolean(false);
        else if (t.text == "none" || t.text == "None") e->literal = Value::none();
        else {
          e->kind = Expr::Kind::kName;
          e->name = t.text;
          if (e->name == "loop") ++loop_refs_;
        }
        return e;
      }
      case Token::Kind::kString: {
        std::string s = t.text;
        while (peek() != nullptr && peek()->kind == Token::Kind::kString) s += next("string").text;
        auto e = make_expr(Expr::Kind::kLiteral, t.line);
        e->literal = Value::string(std::move(s));
        return e;
      }
      case Token::Kind::kInt: {
        auto e = make_expr(Expr::Kind::kLiteral, t.line);
        e->literal = Value::integer(t.int_value);
        return e;
      }
      case Token::Kind::kFloat: {
        auto e = make_expr(Expr::Kind::kLiteral, t.line);
        e->literal = Value::floating(t.float_value);
        return e;
      }
      case Token::Kind::kOp:
        break;
    }
    if (t.text == "(") {
      if (is_op(peek(), ")")) {
        ++tok_;
        return make_expr(Expr::Kind::kTuple, t.line);
      }
      ExprPtr inner = parse_conditional();
      if (is_op(peek(), ",")) {
        auto tup = make_expr(Expr::Kind::kTuple, t.line);
        tup->items.push_back(std::move(inner));
        while (is_op(peek(), ",")) {
          ++tok_;
          if (is_op(peek(), ")")) break;
          tup->items.push_back(parse_conditional());
        }
        inner = seal(std::move(tup));
      }
      expect_op(")");
      return inner;
    }
    if (t.text == "[") {
      auto e = make_expr(Expr::Kind::kList, t.line);
      while (!is_op(peek(), "]")) {
        e->items.push_back(parse_conditional());
        if (!is_op(peek(), ",")) break;
        ++tok_;
      }
      expect_op("]");
      return seal(std::move(e));
    }
    if (t.text == "{") {
      auto e = make_expr(Expr::Kind::kDict, t.line);
      while (!is_op(peek(), "}")) {
        e->items.push_back(parse_conditional());
        expect_op(":");
        e->items.push_back(parse_conditional());
        if (!is_op(peek(), ",")) break;
        ++tok_;
      }
      expect_op("}");
      return seal(std::move(e));
    }
    fail(t.line, "unexpected '" + t.text + "' in expression");
  }

  ExprPtr parse_postfix(ExprPtr e) {
    while (true) {
      const Token* t = peek();
      if (is_op(t, ".")) {
        int l = t->line;
        ++tok_;
        const Token& n = next("an attribute name after '.'");
        if (n.kind == Token::Kind::kName) {
          auto a = make_expr(Expr::Kind::kAttr, l);
          a->a = std::move(e);
          a->name = n.text;
          e = seal(std::move(a));
        } else if (n.kind == Token::Kind::kInt) {
          auto a = make_expr(Expr::Kind::kItem, l);
          a->a = std::move(e);
          a->b = make_expr(Expr::Kind::kLiteral, l);
          a->b->literal = Value::integer(n.int_value);
          e = seal(std::move(a));
        } else {
          fail(l, "expected an attribute name after '.', found '" + n.text + "'");
        }
      } else if (is_op(t, "[")) {
        e = parse_subscript(std::move(e));
      } else if (is_op(t, "(")) {
        auto c = make_expr(Expr::Kind::kCall, t->line);
        c->a = std::move(e);
        parse_call_args(&c->args);
        e = seal(std::move(c));
      } else {
        return e;
      }
    }
  }

  ExprPtr parse_subscript(ExprPtr obj) {
    int l = line();
    expect_op("[");
    ExprPtr parts[3];
    bool is_slice = false;
    int k = 0;
    while (true) {
      if (!is_op(peek(), ":") && !is_op(peek(), "]")) parts[k] = parse_conditional();
      if (is_op(peek(), ":") && k < 2) {
        ++tok_;
        is_slice = true;
        ++k;
        continue;
      }
      break;
    }
    expect_op("]");
    if (!is_slice) {
      if (!parts[0]) fail(l, "empty subscript []");
      auto e = make_expr(Expr::Kind::kItem, l);
      e->a = std::move(obj);
      e->b = std::move(parts[0]);
      return seal(std::move(e));
    }
    auto e = make_expr(Expr::Kind::kSlice, l);
    e->a = std::move(obj);
    e->b = std::move(parts[0]);
    e->c = std::move(parts[1]);
    e->d = std::move(parts[2]);
    return seal(std::move(e));
  }

  void parse_call_args(ArgExprs* args) {
    expect_op("(");
    while (!is_op(peek(), ")")) {
      if (is_op(peek(), "*")) {
        ++tok_;
        args->star = parse_conditional();
      } else if (is_op(peek(), "**")) {
        ++tok_;
        args->double_star = parse_conditional();
      } else if (peek() != nullptr && peek()->kind == Token::Kind::kName && is_op(peek(1), "=")) {
        std::string key = next("argument name").text;
        ++tok_;
        args->keyword.emplace_back(key, parse_conditional());
      } else {
        if (!args->keyword.empty()) fail(line(), "positional argument after a keyword argument");
        args->positional.push_back(parse_conditional());
      }
      if (!is_op(peek(), ",")) break;
      ++tok_;
    }
    expect_op(")");
  }

  ExprPtr parse_filter_expr(ExprPtr e) {
    while (true) {
      const Token* t = peek();
      if (is_op(t, "|")) {
        ++tok_;
        FilterCall f = parse_filter_call();
        auto fe = make_expr(Expr::Kind::kFilter, f.line);
        fe->a = std::move(e);
        fe->name = std::move(f.name);
        fe->args = std::move(f.args);
        e = seal(std::move(fe));
      } else if (is_name(t, "is")) {
        int l = t->line;
        ++tok_;
        auto te = make_expr(Expr::Kind::kTest, l);
        if (is_name(peek(), "not")) {
          ++tok_;
          te->negate = true;
        }
        te->name = expect_name("a test name after 'is'");
        te->a = std::move(e);
        const Token* n = peek();
        if (is_op(n, "(")) {
          parse_call_args(&te->args);
        } else if (n != nullptr && !is_name(n, "else") && !is_name(n, "or") && !is_name(n, "and") &&
                   !is_name(n, "if") && (n->kind != Token::Kind::kOp || n->text == "[" || n->text == "{")) {
          if (is_name(n, "is")) fail(n->line, "unexpected 'is' after a test");
          te->args.positional.push_back(parse_postfix(parse_primary()));
        }
        e = seal(std::move(te));
      } else if (is_op(t, "(")) {
        auto c = make_expr(Expr::Kind::kCall, t->line);
        c->a = std::move(e);
        parse_call_args(&c->args);
        e = seal(std::move(c));
      } else {
        return e;
      }
    }
  }

  std::vector<Segment> segs_;
  size_t seg_ = 0;
  const std::vector<Token>* toks_ = nullptr;
  size_t tok_ = 0;
  int seg_line_ = 0;
  int depth_ = 0;
  int loop_depth_ = 0;
  int64_t loop_refs_ = 0;  // `loop` names parsed so far (Stmt::uses_loop)
};

}  // namespace

Body parse_template(const std::string& source) { return Parser(lex(source)).parse(); }

}  // namespace rl::jinja
