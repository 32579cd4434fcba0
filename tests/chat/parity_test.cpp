// Chat-template parity: every case of tests/data/chat/parity_cases.json is rendered by ridgeline and by
// @huggingface/jinja (tests/chat/render_reference.mjs, run with node) and must match byte for byte — or fail
// with the same error message. Needs the npm test tools (scripts/setup.sh installs them).
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <memory>
#include <string>

#include "chat/chat_template.h"
#include "core/file.h"
#include "core/json.h"

namespace rl {
namespace {

const std::string kSrc = RIDGELINE_SOURCE_DIR;

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '\n') out += "\\n";
    else if (c == '\t') out += "\\t";
    else out.push_back(c);
  }
  return out;
}

// "" when equal, else where they first differ with 60 bytes of context from each side.
std::string first_difference(const std::string& want, const std::string& got) {
  if (want == got) return "";
  size_t k = 0;
  while (k < want.size() && k < got.size() && want[k] == got[k]) ++k;
  size_t from = k > 60 ? k - 60 : 0;
  return "first difference at byte " + std::to_string(k) + " (reference " + std::to_string(want.size()) +
         " bytes, ridgeline " + std::to_string(got.size()) + ")\n  reference: ..." +
         escape(want.substr(from, k - from + 60)) + "\n  ridgeline: ..." + escape(got.substr(from, k - from + 60));
}

Result<ChatTemplate> load_template(const OrderedJson& spec) {
  if (spec.contains("tokenizer_config")) {
    std::string path = kSrc + "/" + spec["tokenizer_config"].get<std::string>();
    RL_ASSIGN_OR_RETURN(std::string text, read_file(path));
    RL_ASSIGN_OR_RETURN(OrderedJson config, parse_ordered_json(text, path));
    return ChatTemplate::from_tokenizer_config(config, path);
  }
  RL_ASSIGN_OR_RETURN(std::string source, read_file(kSrc + "/" + spec["source"].get<std::string>()));
  return ChatTemplate::from_source(source, spec["special_tokens"]);
}

TEST(ChatTemplateParity, MatchesHuggingFaceJinja) {
  const std::string modules = kSrc + "/tests/js/node_modules/@huggingface/jinja";
  ASSERT_TRUE(is_directory(modules)) << modules << " is missing: run scripts/setup.sh to install the npm test tools";
  const std::string cases_path = kSrc + "/tests/data/chat/parity_cases.json";
  const std::string ref_path = std::string(RIDGELINE_BINARY_DIR) + "/chat_parity_reference.json";
  std::string cmd = "node '" + kSrc + "/tests/chat/render_reference.mjs' '" + cases_path + "' '" + ref_path + "'";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << "the reference renderer failed: " << cmd;

  auto cases_text = read_file(cases_path);
  ASSERT_TRUE(cases_text) << cases_text.message();
  auto spec = parse_ordered_json(*cases_text, cases_path);
  ASSERT_TRUE(spec) << spec.message();
  auto ref_text = read_file(ref_path);
  ASSERT_TRUE(ref_text) << ref_text.message();
  auto reference = parse_ordered_json(*ref_text, ref_path);
  ASSERT_TRUE(reference) << reference.message();

  std::map<std::string, std::shared_ptr<ChatTemplate>> templates;
  for (auto it = (*spec)["templates"].begin(); it != (*spec)["templates"].end(); ++it) {
    auto t = load_template(it.value());
    ASSERT_TRUE(t) << it.key() << ": " << t.message();
    templates[it.key()] = std::make_shared<ChatTemplate>(std::move(t).value());
  }

  int num_compared = 0;
  for (const auto& c : (*spec)["cases"]) {
    const std::string name = c["name"].get<std::string>();
    SCOPED_TRACE(name);
    ASSERT_TRUE(reference->contains(name)) << "no reference output";
    const OrderedJson& want = (*reference)[name];
    ChatTemplateInputs in;
    in.messages = c["messages"];
    if (c.contains("tools")) in.tools = c["tools"];
    in.add_generation_prompt = c.value("add_generation_prompt", false);
    if (c.contains("extra")) in.extra = c["extra"];
    in.now_unix_seconds = c.value("now", (*spec)["now"].get<int64_t>());
    auto got = templates.at(c["template"].get<std::string>())->apply(in);
    if (want.contains("error")) {
      const std::string msg = want["error"].get<std::string>();
      EXPECT_FALSE(got.is_ok()) << name << ": the reference fails with \"" << msg << "\" but ridgeline rendered:\n"
                                << (got.is_ok() ? *got : "");
      if (!got.is_ok()) {
        EXPECT_NE(got.message().find(msg), std::string::npos) << name << ": " << got.message();
      }
    } else {
      ASSERT_TRUE(got.is_ok()) << name << ": " << got.message();
      EXPECT_EQ(first_difference(want["output"].get<std::string>(), *got), "") << name;
    }
    ++num_compared;
  }
  EXPECT_EQ(num_compared, static_cast<int>((*spec)["cases"].size()));
  EXPECT_GE(num_compared, 70);
}

}  // namespace
}  // namespace rl
