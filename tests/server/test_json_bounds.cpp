// core/json's bounds on untrusted JSON: nesting depth is an error naming the limit, objects keep insertion order
// with hashed lookup, and huge objects parse in linear time.
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "core/json.h"

namespace rl {
namespace {

std::string key(int i) {
  std::string s = "k";
  s += std::to_string(i);
  return s;
}

TEST(JsonBounds, DepthLimitNamesTheLimit) {
  std::string ok(10, '[');
  ok.append(10, ']');
  EXPECT_TRUE(parse_ordered_json(ok, "body", 10));
  std::string deep(11, '[');
  deep.append(11, ']');
  auto r = parse_ordered_json(deep, "body", 10);
  ASSERT_FALSE(r);
  EXPECT_NE(r.message().find("limit of 10 levels"), std::string::npos) << r.message();
  // Brackets inside strings do not count; escaped quotes do not end a string.
  EXPECT_TRUE(parse_ordered_json(R"({"a": "[[[[[[[[[[[[\"[[[[[[["})", "body", 2));
  EXPECT_FALSE(parse_json(std::string(100000, '{'), "body", 64));
  std::string nested(1000, '[');
  nested.append(1000, ']');
  EXPECT_TRUE(parse_json(nested, "config"));  // no limit by default
  EXPECT_EQ(json_nesting_depth("[{\"x\": [1]}]", 100), 3);
}

TEST(JsonBounds, ObjectsKeepInsertionOrderAndFindEveryKey) {
  OrderedJson j = OrderedJson::object();
  for (int i = 99; i >= 0; --i) j[key(i)] = i;
  int expect = 99;
  for (auto& [k, v] : j.items()) {
    EXPECT_EQ(k, key(expect));
    EXPECT_EQ(v.get<int>(), expect--);
  }
  for (int i = 0; i < 100; ++i) EXPECT_EQ(j.at(key(i)).get<int>(), i);
  EXPECT_FALSE(j.contains("k100"));
  EXPECT_EQ(j.erase("k50"), 1u);
  EXPECT_EQ(j.size(), 99u);
  EXPECT_FALSE(j.contains("k50"));
  for (int i = 0; i < 100; ++i) {
    if (i == 50) continue;
    EXPECT_EQ(j[key(i)].get<int>(), i);
  }
  EXPECT_EQ(j.size(), 99u);
  OrderedJson copy = j;
  EXPECT_EQ(copy, j);
  EXPECT_EQ(copy.at("k7").get<int>(), 7);
  // Duplicate keys: the first position, the last value (as nlohmann::ordered_json).
  auto d = parse_ordered_json(R"({"a": 1, "b": 2, "a": 3})", "body");
  ASSERT_TRUE(d);
  EXPECT_EQ(d->dump(), R"({"a":3,"b":2})");
  j.clear();
  EXPECT_TRUE(j.empty());
  j["x"] = 1;
  EXPECT_EQ(j.dump(), R"({"x":1})");
}

TEST(JsonBounds, HugeObjectsParseInLinearTime) {
  std::string text = "{";
  const int n = 200000;
  for (int i = 0; i < n; ++i) {
    if (i) text += ',';
    text += '"';
    text += std::to_string(i);
    text += "\":1";
  }
  text += "}";
  const auto t0 = std::chrono::steady_clock::now();
  auto r = parse_ordered_json(text, "body");
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->size(), static_cast<size_t>(n));
  EXPECT_TRUE(r->contains("199999"));
  EXPECT_LT(s, 5.0);  // quadratic lookup took ~30 s here; linear takes well under a second
}

}  // namespace
}  // namespace rl
