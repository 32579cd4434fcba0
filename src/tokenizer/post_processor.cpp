#include "tokenizer/post_processor.h"
#include "tokenizer/limits.h"

namespace rl::tok {
namespace {

// Items of a template: a run of special ids, or the sequence itself (empty `ids`, is_sequence
// true).
struct TemplateItem {
  bool is_sequence = false;
  std::vector<int32_t> ids;
};

class TemplateProcessor final : public PostProcessor {
 public:
  explicit TemplateProcessor(std::vector<TemplateItem> items) : items_(std::move(items)) {}
  void process(std::vector<int32_t>* ids, bool add_special_tokens) const override {
    if (!add_special_tokens) return;
    std::vector<int32_t> out;
    out.reserve(ids->size() + 4);
    for (const TemplateItem& item : items_) {
      if (item.is_sequence) {
        out.insert(out.end(), ids->begin(), ids->end());
      } else {
        out.insert(out.end(), item.ids.begin(), item.ids.end());
      }
    }
    ids->swap(out);
  }

 private:
  std::vector<TemplateItem> items_;
};

class NoopProcessor final : public PostProcessor {
 public:
  void process(std::vector<int32_t>*, bool) const override {}
};

class SequenceProcessor final : public PostProcessor {
 public:
  explicit SequenceProcessor(std::vector<std::unique_ptr<PostProcessor>> parts)
      : parts_(std::move(parts)) {}
  void process(std::vector<int32_t>* ids, bool add_special_tokens) const override {
    for (const auto& p : parts_) p->process(ids, add_special_tokens);
  }

 private:
  std::vector<std::unique_ptr<PostProcessor>> parts_;
};

Result<std::vector<TemplateItem>> parse_template(const Json& j, const std::string& what) {
  auto single = j.find("single");
  if (single == j.end() || !single->is_array())
    return Status::error(what + ": TemplateProcessing needs an array \"single\"");
  const Json* specials = j.contains("special_tokens") && j["special_tokens"].is_object()
                             ? &j["special_tokens"]
                             : nullptr;
  std::vector<TemplateItem> items;
  for (size_t i = 0; i < single->size(); ++i) {
    const Json& item = (*single)[i];
    std::string where = what + ": single[" + std::to_string(i) + "]";
    if (item.is_object() && item.contains("Sequence")) {
      const Json& seq = item["Sequence"];
      if (!seq.is_object() || seq.value("id", "") != "A")
        return Status::error(where + ": only sequence \"A\" is supported");
      items.push_back({true, {}});
      continue;
    }
    if (!item.is_object() || !item.contains("SpecialToken") || !item["SpecialToken"].is_object() ||
        !item["SpecialToken"].contains("id") || !item["SpecialToken"]["id"].is_string()) {
      return Status::error(where +
                           ": must be {\"SpecialToken\": {\"id\": ...}} or {\"Sequence\": ...}");
    }
    std::string name = item["SpecialToken"]["id"].get<std::string>();
    if (specials == nullptr || !specials->contains(name) || !(*specials)[name].is_object() ||
        !(*specials)[name].contains("ids") || !(*specials)[name]["ids"].is_array()) {
      return Status::error(where + ": special token \"" + name +
                           "\" is not defined in special_tokens");
    }
    TemplateItem t;
    for (const Json& id : (*specials)[name]["ids"]) {
      if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > INT32_MAX) {
        return Status::error(where + ": special token \"" + name + "\" has an invalid id " +
                             json_brief(id));
      }
      t.ids.push_back(static_cast<int32_t>(id.get<int64_t>()));
    }
    items.push_back(std::move(t));
  }
  return items;
}

// RobertaProcessing / BertProcessing: "cls": [token, id], "sep": [token, id] → cls, A, sep.
Result<std::vector<TemplateItem>> parse_cls_sep(const Json& j, const std::string& what) {
  int32_t ids[2] = {0, 0};
  const char* keys[2] = {"cls", "sep"};
  for (int k = 0; k < 2; ++k) {
    auto it = j.find(keys[k]);
    if (it == j.end() || !it->is_array() || it->size() != 2 || !(*it)[1].is_number_integer() ||
        (*it)[1].get<int64_t>() < 0 || (*it)[1].get<int64_t>() > INT32_MAX) {
      return Status::error(what + ": \"" + keys[k] + "\" must be [token, id]");
    }
    ids[k] = static_cast<int32_t>((*it)[1].get<int64_t>());
  }
  return std::vector<TemplateItem>{{false, {ids[0]}}, {true, {}}, {false, {ids[1]}}};
}

}  // namespace

Result<std::unique_ptr<PostProcessor>> parse_post_processor(const Json& j, const std::string& what, int depth) {
  using Ptr = std::unique_ptr<PostProcessor>;
  if (j.is_null()) return Ptr();
  if (!j.is_object() || !j.contains("type") || !j["type"].is_string()) {
    return Status::error(what + ": must be an object with a string \"type\"");
  }
  std::string type = j["type"].get<std::string>();
  if (type == "ByteLevel") return Ptr(new NoopProcessor());
  if (type == "TemplateProcessing") {
    RL_ASSIGN_OR_RETURN(auto items, parse_template(j, what));
    return Ptr(new TemplateProcessor(std::move(items)));
  }
  if (type == "RobertaProcessing" || type == "BertProcessing") {
    RL_ASSIGN_OR_RETURN(auto items, parse_cls_sep(j, what + ": " + type));
    return Ptr(new TemplateProcessor(std::move(items)));
  }
  if (type == "Sequence") {
    if (depth >= kMaxComponentNesting) {
      return Status::error(what + ": Sequence nested deeper than " + std::to_string(kMaxComponentNesting) +
                           " levels");
    }
    auto it = j.find("processors");
    if (it == j.end() || !it->is_array())
      return Status::error(what + ": Sequence needs an array \"processors\"");
    std::vector<Ptr> parts;
    for (size_t i = 0; i < it->size(); ++i) {
      RL_ASSIGN_OR_RETURN(Ptr part, parse_post_processor(
                                        (*it)[i], what + ".processors[" + std::to_string(i) + "]", depth + 1));
      if (part) parts.push_back(std::move(part));
    }
    return Ptr(new SequenceProcessor(std::move(parts)));
  }
  return Status::error(what + " type \"" + type + "\" is not supported");
}

}  // namespace rl::tok
