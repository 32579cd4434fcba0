// Bad and hostile templates: each gives a clear error naming the problem and its line, never a crash or a hang.
#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "chat/chat_template.h"
#include "chat/jinja.h"

namespace rl::jinja {
namespace {

std::string parse_error(const std::string& source) {
  auto t = Template::parse(source);
  return t ? "" : t.message();
}

std::string render_error(const std::string& source, const RenderLimits& limits = {}) {
  auto t = Template::parse(source);
  if (!t) return "parse failed: " + t.message();
  auto out = t->render(Object{}, limits);
  return out ? "" : out.message();
}

TEST(JinjaErrors, UnclosedTagNamesItsLine) {
  EXPECT_EQ(parse_error("a\n{% if x %}\nb"), "line 2: unclosed '{% if %}': missing '{% endif %}' before the end of the template");
  EXPECT_EQ(parse_error("a\n\n{% for x in y %}"), "line 3: unclosed '{% for %}': missing '{% endfor %}' before the end of the template");
  EXPECT_EQ(parse_error("x\n{{ a "), "line 2: unclosed tag: missing '}}'");
  EXPECT_EQ(parse_error("{# never closed"), "line 1: unclosed comment: missing '#}'");
  EXPECT_EQ(parse_error("{{ 'abc }}"), "line 1: unterminated string literal");
}

TEST(JinjaErrors, UnknownFilterTestTagAndMethod) {
  EXPECT_EQ(render_error("\n{{ 'a' | frobnicate }}"), "line 2: unknown filter 'frobnicate'");
  EXPECT_EQ(render_error("{{ 1 is frobnicated }}"), "line 1: unknown test 'frobnicated'");
  EXPECT_EQ(parse_error("{% frob %}"), "line 1: unknown tag 'frob'");
  EXPECT_EQ(render_error("{{ 'a'.frob() }}"), "line 1: 'frob' is undefined (called as a function)");
  EXPECT_EQ(parse_error("{% endif %}"), "line 1: unexpected '{% endif %}' with no matching opening tag");
}

TEST(JinjaErrors, BadSyntax) {
  EXPECT_EQ(parse_error("{{ 1 + }}"), "line 1: unexpected end of tag, expected an expression");
  EXPECT_EQ(parse_error("{% if %}{% endif %}"), "line 1: unexpected end of tag, expected an expression");
  EXPECT_EQ(parse_error("{{ a b }}"), "line 1: unexpected 'b' at the end of the tag");
  EXPECT_EQ(parse_error("{% for x y %}{% endfor %}"), "line 1: expected 'in' in for loop, found 'y'");
  EXPECT_EQ(parse_error("{{ a ? b }}"), "line 1: unexpected character '?' in tag");
  EXPECT_EQ(parse_error("{% break %}"), "line 1: '{% break %}' outside a for loop");
}

TEST(JinjaErrors, NoTemplateLoading) {
  EXPECT_EQ(parse_error("{% include 'x.j2' %}"),
            "line 1: '{% include %}' is not allowed: chat templates are sandboxed and cannot load templates");
  EXPECT_NE(parse_error("{% extends 'base' %}").find("not allowed"), std::string::npos);
  EXPECT_NE(parse_error("{% import 'm' as m %}").find("not allowed"), std::string::npos);
}

TEST(JinjaErrors, RaiseExceptionCarriesTheMessage) {
  EXPECT_EQ(render_error("ok\n{{ raise_exception('Roles must alternate') }}"), "line 2: Roles must alternate");
}

TEST(JinjaErrors, RuntimeTypeErrors) {
  EXPECT_EQ(render_error("{{ 'a' + 1 }}"), "line 1: unsupported operand type(s) for +: 'str' and 'int'");
  EXPECT_EQ(render_error("{{ missing + 1 }}"), "line 1: 'missing' is undefined");
  EXPECT_EQ(render_error("{{ missing() }}"), "line 1: 'missing' is undefined (called as a function)");
  EXPECT_EQ(render_error("{{ 1 // 0 }}"), "line 1: integer division or modulo by zero");
  EXPECT_EQ(render_error("{% for x in 3 %}{% endfor %}"), "line 1: 'int' object is not iterable");
  EXPECT_EQ(render_error("{% set d = {} %}{% set d.x = 1 %}"),
            "line 1: cannot assign attribute 'x' on 'd': only a namespace() object accepts attribute assignment");
  EXPECT_EQ(render_error("{{ 9223372036854775807 + 1 }}"), "line 1: integer overflow");
}

TEST(JinjaLimits, NestedLoopsHitTheIterationLimit) {
  RenderLimits limits;
  limits.max_loop_iterations = 100000;
  std::string msg = render_error(
      "{% for a in range(1000) %}{% for b in range(1000) %}{% for c in range(1000) %}{% endfor %}{% endfor %}"
      "{% endfor %}",
      limits);
  EXPECT_NE(msg.find("loop limit exceeded"), std::string::npos) << msg;
  EXPECT_NE(render_error("{{ range(10000000000) | length }}").find("loop limit exceeded"), std::string::npos);
}

TEST(JinjaLimits, MacroRecursionHitsTheDepthLimit) {
  std::string msg = render_error("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}");
  EXPECT_NE(msg.find("recursion limit exceeded"), std::string::npos) << msg;
  // Bounded recursion below the limit works.
  auto t = Template::parse("{% macro f(n) %}{% if n > 0 %}{{ n }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(5) }}");
  ASSERT_TRUE(t);
  EXPECT_EQ(*t->render(Object{}), "54321");
}

TEST(JinjaLimits, HugeStringsHitTheOutputLimit) {
  RenderLimits limits;
  limits.max_output_bytes = 1 << 20;
  EXPECT_NE(render_error("{{ 'x' * 100000000000 }}", limits).find("output limit exceeded"), std::string::npos);
  EXPECT_NE(render_error("{% set s = 'abcdefgh' * 1000 %}{% for i in range(1000) %}{{ s }}{% endfor %}", limits)
                .find("output limit exceeded"),
            std::string::npos);
  EXPECT_NE(render_error("{% set ns = namespace(s='x') %}{% for i in range(100) %}{% set ns.s = ns.s ~ ns.s %}"
                         "{% endfor %}",
                         limits)
                .find("output limit exceeded"),
            std::string::npos);
}

TEST(JinjaLimits, DeeplyNestedExpressionsAreAParseError) {
  std::string deep = "{{ " + std::string(5000, '(') + "1" + std::string(5000, ')') + " }}";
  EXPECT_NE(parse_error(deep).find("nested too deeply"), std::string::npos);
  std::string nots = "{{ ";
  for (int k = 0; k < 5000; ++k) nots += "not ";
  EXPECT_NE(parse_error(nots + "x }}").find("nested too deeply"), std::string::npos);
  std::string ifs;
  for (int k = 0; k < 5000; ++k) ifs += "{% if x %}";
  EXPECT_NE(parse_error(ifs).find("nested too deeply"), std::string::npos);
  std::string lists = "{{ " + std::string(5000, '[') + std::string(5000, ']') + " }}";
  EXPECT_NE(parse_error(lists).find("nested too deeply"), std::string::npos);
}

TEST(JinjaThreads, ConcurrentRendersOfOneTemplateAgree) {
  auto t = Template::parse("{% set ns = namespace(n=0) %}{% for x in xs %}{% set ns.n = ns.n + x %}{% endfor %}{{ ns.n }}");
  ASSERT_TRUE(t);
  Object vars;
  vars.set("xs", Value::from_json(OrderedJson::parse("[1, 2, 3, 4]")));
  std::vector<std::thread> threads;
  std::atomic<int> num_ok{0};
  for (int k = 0; k < 8; ++k) {
    threads.emplace_back([&] {
      for (int i = 0; i < 200; ++i) {
        auto out = t->render(vars);
        if (out && *out == "10") ++num_ok;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(num_ok.load(), 8 * 200);
}

}  // namespace
}  // namespace rl::jinja
