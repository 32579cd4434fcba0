// Hostile templates and inputs from issue 11: long filter and operator chains, values nested without bound
// (from JSON or built at run time), their destruction, reference cycles through namespaces, quadratic work and
// quadratic substring search, oversized lists. Each ends in a clear error naming the limit, or renders, in
// bounded time.
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "../sanitized.h"
#include "chat/chat_template.h"
#include "chat/jinja.h"
#include "chat/parser.h"

namespace rl::jinja {
namespace {

std::string render_error(const std::string& source, const RenderLimits& limits = {}) {
  auto t = Template::parse(source);
  if (!t) return "parse: " + t.message();
  auto out = t->render(Object{}, limits);
  return out ? "" : out.message();
}

std::string render(const std::string& source) {
  auto t = Template::parse(source);
  if (!t) return "parse: " + t.message();
  auto out = t->render(Object{});
  return out ? *out : "error: " + out.message();
}

TEST(JinjaHardening, TwentyThousandChainedFiltersAreAParseError) {
  std::string src = "{{ 'x'";
  for (int k = 0; k < 20000; ++k) src += "|trim";
  auto t = Template::parse(src + " }}");
  ASSERT_FALSE(t);
  EXPECT_NE(t.message().find("expression nested too deeply: more than 256 levels"), std::string::npos)
      << t.message();
  // A chain under the limit renders.
  std::string ok = "{{ ' x '";
  for (int k = 0; k < 200; ++k) ok += "|trim";
  EXPECT_EQ(render(ok + " }}"), "x");
}

TEST(JinjaHardening, LongOperatorAttributeAndCallChainsAreBounded) {
  std::string sum = "{{ 1";
  for (int k = 0; k < 20000; ++k) sum += " + 1";
  EXPECT_NE(render_error(sum + " }}").find("nested too deeply"), std::string::npos);
  std::string attrs = "{{ x";
  for (int k = 0; k < 20000; ++k) attrs += ".a";
  EXPECT_NE(render_error(attrs + " }}").find("nested too deeply"), std::string::npos);
  std::string items = "{{ x";
  for (int k = 0; k < 20000; ++k) items += "[0]";
  EXPECT_NE(render_error(items + " }}").find("nested too deeply"), std::string::npos);
  std::string calls = "{{ x";
  for (int k = 0; k < 20000; ++k) calls += "()";
  EXPECT_NE(render_error(calls + " }}").find("nested too deeply"), std::string::npos);
  // A {% filter %} block applies its chain in a loop: long chains are fine there.
  std::string block = "{% filter upper";
  for (int k = 0; k < 20000; ++k) block += "|trim";
  EXPECT_EQ(render(block + " %} ab {% endfilter %}"), "AB");
}

TEST(JinjaHardening, MillionDeepListBuildingStopsAtTheDepthLimit) {
  const auto t0 = std::chrono::steady_clock::now();
  std::string msg = render_error(
      "{% set ns = namespace(x=[]) %}{% for i in range(1000000) %}{% set ns.x = [ns.x] %}{% endfor %}");
  EXPECT_NE(msg.find("nested deeper than 128 levels"), std::string::npos) << msg;
  EXPECT_EQ(msg.rfind("line 1: ", 0), 0u) << msg;
  msg = render_error("{% set ns = namespace(x={}) %}{% for i in range(1000000) %}{% set ns.x = {'a': ns.x} %}"
                     "{% endfor %}");
  EXPECT_NE(msg.find("nested deeper than 128 levels"), std::string::npos) << msg;
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(20));
  // Under the limit: printing, comparing and tojson of a 100-deep list work.
  EXPECT_EQ(render("{% set ns = namespace(x=[]) %}{% for i in range(3) %}{% set ns.x = [ns.x] %}{% endfor %}"
                   "{{ ns.x }} {{ ns.x == [[[[]]]] }} {{ ns.x|tojson }}"),
            "[[[[]]]] True [[[[]]]]");
}

TEST(JinjaHardening, LongNamespaceChainIsDestroyedWithoutRecursion) {
  // Namespaces are mutable, so a chain of them has no depth bound at construction: its destruction must be
  // iterative. The work budget is raised so the loop runs to the end.
  RenderLimits limits;
  limits.max_loop_iterations = 1'000'000;
  limits.max_work = int64_t{1} << 40;
  auto t = Template::parse(
      "{% set head = namespace() %}{% set ns = namespace(cur=head) %}{% for i in range(300000) %}"
      "{% set n = namespace() %}{% set t = ns.cur %}{% set t.next = n %}{% set ns.cur = n %}{% endfor %}ok");
  ASSERT_TRUE(t) << t.message();
  auto out = t->render(Object{}, limits);
  ASSERT_TRUE(out) << out.message();
  EXPECT_EQ(*out, "ok");
}

TEST(JinjaHardening, DeepValueReleasedOutsideARender) {
  // A 1,000,000-long namespace chain built by hand (lists and dicts are depth-checked; namespaces, being
  // mutable, are not) and dropped: ~Value must not recurse.
  Value v = Value::namespace_(Object{});
  Value head = v;
  for (int k = 0; k < 1000000; ++k) {
    Value next = Value::namespace_(Object{});
    v.ns->set("next", next);
    v = next;
  }
  v = Value();
  head = Value();
  SUCCEED();
}

TEST(JinjaHardening, NamespaceCyclesAreBrokenAfterTheRender) {
  // LeakSanitizer (asan preset) fails this test if the cycle outlives the render.
  EXPECT_EQ(render("{% set ns = namespace() %}{% set ns.me = ns %}{% set ns.l = [ns, [ns]] %}{{ ns.me.me.l|length }}"),
            "2");
}

TEST(JinjaHardening, QuadraticStringBuildingHitsTheWorkLimit) {
  const auto t0 = std::chrono::steady_clock::now();
  std::string msg = render_error(
      "{% set ns = namespace(s='') %}{% for i in range(1000000) %}{% set ns.s = ns.s ~ 'x' %}{% endfor %}");
  EXPECT_NE(msg.find("work limit exceeded"), std::string::npos) << msg;
  msg = render_error(
      "{% set ns = namespace(l=[]) %}{% for i in range(1000000) %}{% set ns.l = ns.l + [i] %}{% endfor %}");
  EXPECT_NE(msg.find("work limit exceeded"), std::string::npos) << msg;
  msg = render_error("{% set s = 'a' * 20000000 %}{% for i in range(1000000) %}{% if s|length %}{% endif %}"
                     "{% endfor %}");
  EXPECT_NE(msg.find("work limit exceeded"), std::string::npos) << msg;
  // Each loop stops at the work limit: 30 s in all for an optimised build; under ASan (several times slower, and
  // 179 s seen on a loaded 2-core machine) the bound only catches a hang.
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(kSanitized ? 600 : 30));
}

TEST(JinjaHardening, SubstringSearchIsLinear) {
  // 'aaa...ab' in 'aaa...a' is O(n·m) with a naive search: 2^23 x 2^22 here.
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(render("{% set h = 'a' * 8000000 %}{% set n = 'a' * 4000000 ~ 'b' %}{{ n in h }} {{ h.count(n) }} "
                   "{{ h.find(n) }} {{ h.rfind(n) }} {{ h.split(n)|length }} {{ h.replace(n, 'x')|length }}"),
            "False 0 -1 -1 1 8000000");
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(20));
  EXPECT_EQ(render("{{ 'abcabcab'.count('abc') }} {{ 'abcabcab'.rfind('cab') }} {{ 'xabcabd'.find('abcabd') }} "
                   "{{ 'a-b--c'.split('--') }}"),
            "2 5 1 ['a-b', 'c']");
  EXPECT_EQ(find_text("aaaab", "aab"), 2u);
  EXPECT_EQ(rfind_text("abababa", "aba"), 4u);
  EXPECT_EQ(find_text("abc", "abcd"), std::string::npos);
}

TEST(JinjaHardening, ListsAreCappedInLength) {
  EXPECT_NE(render_error("{{ range(2000000)|length }}").find("more than 1048576 items"), std::string::npos);
  EXPECT_NE(render_error("{{ ([1, 2] * 1000000)|length }}").find("more than 1048576 items"), std::string::npos);
  EXPECT_NE(render_error("{{ ('ab' * 1000000)|list|length }}").find("more than 1048576 items"), std::string::npos);
  EXPECT_NE(render_error("{{ (',' * 2000000).split(',')|length }}").find("more than 1048576 parts"),
            std::string::npos);
  EXPECT_NE(render_error("{{ ('x' * 1000000) * 100000000000000 }}").find("output limit exceeded"), std::string::npos);
  // A list holding one long string many times prints past the output limit: caught while printing.
  EXPECT_NE(render_error("{% set s = 'x' * 1000000 %}{{ [s] * 1000 }}").find("output limit exceeded"),
            std::string::npos);
  EXPECT_EQ(render("{{ range(1000)|length }}"), "1000");
}

TEST(JinjaHardening, StringLoopsAreCountedBeforeSplitting) {
  RenderLimits limits;
  limits.max_loop_iterations = 1000;
  EXPECT_NE(render_error("{% for c in 'x' * 30000000 %}{% endfor %}", limits).find("loop limit exceeded"),
            std::string::npos);
}

// A loop whose body never names `loop` builds no loop object per iteration (the loop-limit cases run millions of
// iterations); loops that name it, directly or in a nested loop, macro or call block of their body, still see it.
TEST(JinjaHardening, LoopObjectOnlyWhereTheBodyNamesIt) {
  EXPECT_EQ(render("{% for a in [1, 2] %}{% for b in 'xy' %}{{ loop.index }}{% endfor %}{{ loop.index }};"
                   "{% endfor %}"),
            "121;122;");
  EXPECT_EQ(render("{% for a in [1, 2, 3] %}{% macro m() %}{{ loop.revindex }}{% endmacro %}{{ m() }}{% endfor %}"),
            "321");
  EXPECT_EQ(render("{% macro m() %}{{ loop is defined }}{% endmacro %}{% for a in [1] %}{{ m() }}{% endfor %}"),
            "False");
  EXPECT_EQ(render("{% for a in [1, 2] %}{{ a }}{% else %}none{% endfor %}{% for a in [] %}{{ a }}{% else %}"
                   "none{% endfor %}"),
            "12none");
  EXPECT_EQ(render("{% set ns = namespace(n=0) %}{% for a in range(200000) %}{% set ns.n = ns.n + 1 %}"
                   "{% endfor %}{{ ns.n }}"),
            "200000");
}

TEST(JinjaHardening, EvaluationDepthIsBoundedAcrossMacroCalls) {
  // 60 nested macro calls, each inside 100 nested ifs: under max_call_depth, but the native stack would not
  // hold it; the combined evaluation depth limit stops it.
  std::string body;
  for (int k = 0; k < 100; ++k) body += "{% if true %}";
  body += "{{ f(n + 1) }}";
  for (int k = 0; k < 100; ++k) body += "{% endif %}";
  std::string msg = render_error("{% macro f(n) %}" + body + "{% endmacro %}{{ f(0) }}");
  EXPECT_NE(msg.find("evaluation nested too deeply"), std::string::npos) << msg;
}

TEST(JinjaHardening, DeepJsonInputsAreAClearError) {
  auto tmpl = ChatTemplate::from_source("{{ messages|length }}", OrderedJson::object());
  ASSERT_TRUE(tmpl) << tmpl.message();
  // Built from text: nlohmann's parser and destructor are iterative, its copy constructor is not.
  const std::string deep = std::string(20000, '[') + std::string(20000, ']');
  ChatTemplateInputs in;
  in.messages = OrderedJson::parse(R"([{"role":"user","content":"hi","x":)" + deep + "}]");
  auto out = tmpl->apply(in);
  ASSERT_FALSE(out);
  EXPECT_NE(out.message().find("messages[0].x[0][0]"), std::string::npos) << out.message().substr(0, 200);
  EXPECT_NE(out.message().find("nested deeper than 128 levels"), std::string::npos);
  in.messages = OrderedJson::parse(R"([{"role":"user","content":"hi"}])");
  in.extra = OrderedJson::parse(R"({"k":)" + deep + "}");
  out = tmpl->apply(in);
  ASSERT_FALSE(out);
  EXPECT_EQ(out.message().rfind("chat template: k[0]", 0), 0u) << out.message().substr(0, 100);
  in.extra = OrderedJson::object();
  in.tools = OrderedJson::parse(deep);
  EXPECT_FALSE(tmpl->apply(in));
  // Wide but shallow inputs convert in linear time. (Filled through the underlying vector: ordered_json's own
  // insertion scans every key, which is quadratic.)
  in.tools = nullptr;
  in.extra = OrderedJson::object();
  OrderedJson& wide = in.extra["wide"] = OrderedJson::object();
  auto& items = static_cast<std::vector<std::pair<const std::string, OrderedJson>>&>(
      wide.get_ref<OrderedJson::object_t&>());
  std::string key;
  for (int k = 0; k < 200000; ++k) {
    key = "k";
    key += std::to_string(k);
    items.emplace_back(key, k);
  }
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_TRUE(tmpl->apply(in));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(20));
}

}  // namespace
}  // namespace rl::jinja
