// Engine semantics against Python jinja2 (configured as transformers does): tests/data/chat/jinja2_expected.json
// holds templates, their variables and what jinja2 3.1.6 rendered (made by make_jinja2_expected.py). These cover
// what the @huggingface/jinja parity cannot: Python printing (None, tuples, reprs), filters it lacks (reject,
// select, batch...), str methods with arguments (strip('\n')), dict equality.
#include <gtest/gtest.h>

#include <string>

#include "chat/jinja.h"
#include "core/file.h"
#include "core/json.h"

namespace rl::jinja {
namespace {

const std::string kDataDir = std::string(RIDGELINE_SOURCE_DIR) + "/tests/data/chat/";

TEST(Jinja2Semantics, MatchesPythonJinja2) {
  auto text = read_file(kDataDir + "jinja2_expected.json");
  ASSERT_TRUE(text) << text.message();
  auto spec = parse_ordered_json(*text, "jinja2_expected.json");
  ASSERT_TRUE(spec) << spec.message();
  RenderOptions options;
  options.now_unix_seconds = (*spec)["now"].get<int64_t>();
  int num_checked = 0;
  for (const auto& c : (*spec)["cases"]) {
    std::string source;
    if (c.contains("template_file")) {
      std::string file = c["template_file"].get<std::string>();
      size_t hash = file.find('#');
      auto content = read_file(kDataDir + file.substr(0, hash));
      ASSERT_TRUE(content) << content.message();
      source = *content;
      if (hash != std::string::npos) {
        auto json = parse_ordered_json(source, file);
        ASSERT_TRUE(json) << json.message();
        source = (*json)[file.substr(hash + 1)].get<std::string>();
      }
    } else {
      source = c["template"].get<std::string>();
    }
    const std::string label = c.contains("name") ? c["name"].get<std::string>() : source;
    SCOPED_TRACE(label);
    auto tmpl = Template::parse(source);
    ASSERT_TRUE(tmpl) << tmpl.message();
    Object vars;
    for (auto it = c["vars"].begin(); it != c["vars"].end(); ++it) vars.set(it.key(), Value::from_json(it.value()));
    auto got = tmpl->render(vars, {}, options);
    if (c.contains("error")) {
      ASSERT_FALSE(got.is_ok()) << "jinja2 fails with \"" << c["error"].get<std::string>() << "\", we rendered: " << *got;
      EXPECT_NE(got.message().find(c["error"].get<std::string>()), std::string::npos) << got.message();
    } else {
      ASSERT_TRUE(got.is_ok()) << got.message();
      EXPECT_EQ(*got, c["expected"].get<std::string>());
    }
    ++num_checked;
  }
  EXPECT_GE(num_checked, 40);
}

}  // namespace
}  // namespace rl::jinja
