// safetensors validation: hand-made malformed files must give a clear error naming the file and the tensor,
// never a crash (this suite also runs under the asan preset).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>

#include "../sanitized.h"
#include "core/file.h"
#include "loader/safetensors.h"

namespace rl {
namespace {

namespace fs = std::filesystem;

class SafetensorsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("rl_st_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Writes u64 header length + header + data into `name`.
  std::string write(const std::string& name, const std::string& header, const std::string& data,
                    int64_t declared_len = -1) {
    std::string bytes(8, '\0');
    uint64_t n = declared_len >= 0 ? static_cast<uint64_t>(declared_len) : header.size();
    for (int i = 0; i < 8; ++i) bytes[static_cast<size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xff);
    bytes += header + data;
    std::string path = (dir_ / name).string();
    EXPECT_TRUE(write_file(path, bytes).is_ok());
    return path;
  }
  std::string open_error(const std::string& path) {
    auto r = SafetensorsFile::open(path);
    EXPECT_FALSE(r.is_ok());
    return r.is_ok() ? "" : r.message();
  }
  fs::path dir_;
};

TEST_F(SafetensorsTest, ValidFileLoadsEveryDtype) {
  std::string h = R"({"a":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]},)"
                  R"("b":{"dtype":"BF16","shape":[3],"data_offsets":[16,22]},)"
                  R"("c":{"dtype":"F16","shape":[1],"data_offsets":[22,24]},"__metadata__":{"format":"pt"}})";
  auto r = SafetensorsFile::open(write("ok.safetensors", h, std::string(24, '\x01')));
  ASSERT_TRUE(r.is_ok()) << r.message();
  const auto& t = (*r)->tensors();
  ASSERT_EQ(t.size(), 3u);
  EXPECT_EQ(t.at("a").dtype, DType::kF32);
  EXPECT_EQ(t.at("a").shape, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(t.at("b").nbytes, 6u);
  EXPECT_EQ(t.at("c").dtype, DType::kF16);
}

TEST_F(SafetensorsTest, TruncatedBeforeHeaderLength) {
  std::string path = (dir_ / "t.safetensors").string();
  ASSERT_TRUE(write_file(path, "abc").is_ok());
  std::string e = open_error(path);
  EXPECT_NE(e.find("truncated"), std::string::npos) << e;
  EXPECT_NE(e.find("t.safetensors"), std::string::npos) << e;
}

TEST_F(SafetensorsTest, TruncatedHeader) {
  std::string e = open_error(write("t.safetensors", "{\"a\":", "", 1000));
  EXPECT_NE(e.find("truncated"), std::string::npos) << e;
}

TEST_F(SafetensorsTest, HugeHeaderLengthRejected) {
  std::string e = open_error(write("h.safetensors", "{}", "", int64_t{1} << 40));
  EXPECT_NE(e.find("exceeds the limit"), std::string::npos) << e;
}

TEST_F(SafetensorsTest, MalformedJson) {
  std::string e = open_error(write("j.safetensors", "{\"a\": [1,", ""));
  EXPECT_NE(e.find("malformed JSON"), std::string::npos) << e;
}

TEST_F(SafetensorsTest, UnknownDtypeNamed) {
  std::string e = open_error(write("d.safetensors", R"({"w":{"dtype":"F64","shape":[1],"data_offsets":[0,8]}})",
                                   std::string(8, '\0')));
  EXPECT_NE(e.find("\"w\""), std::string::npos) << e;
  EXPECT_NE(e.find("F64"), std::string::npos) << e;
}

TEST_F(SafetensorsTest, OffsetsPastEndOfFile) {
  std::string e = open_error(write("o.safetensors", R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})",
                                   std::string(8, '\0')));
  EXPECT_NE(e.find("past the end"), std::string::npos) << e;
  EXPECT_NE(e.find("\"w\""), std::string::npos) << e;
}

TEST_F(SafetensorsTest, ShapeMismatch) {
  std::string e = open_error(write("s.safetensors", R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,16]}})",
                                   std::string(16, '\0')));
  EXPECT_NE(e.find("needs 12 bytes"), std::string::npos) << e;
}

TEST_F(SafetensorsTest, OverlappingTensors) {
  std::string h = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                  R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})";
  std::string e = open_error(write("ov.safetensors", h, std::string(12, '\0')));
  EXPECT_NE(e.find("overlap"), std::string::npos) << e;
}

// An empty tensor between two overlapping ones hides nothing (the overlap is checked against the furthest end
// so far, not only the previous tensor).
TEST_F(SafetensorsTest, OverlapAcrossAnEmptyTensorAndAContainedOne) {
  std::string h = R"({"big":{"dtype":"F32","shape":[25],"data_offsets":[0,100]},)"
                  R"("empty":{"dtype":"F32","shape":[0],"data_offsets":[10,10]},)"
                  R"("inner":{"dtype":"F32","shape":[2],"data_offsets":[50,58]}})";
  std::string e = open_error(write("ov2.safetensors", h, std::string(100, '\0')));
  EXPECT_NE(e.find("tensors \"big\" and \"inner\" overlap"), std::string::npos) << e;
  std::string h2 = R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},)"
                   R"("b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]},)"
                   R"("c":{"dtype":"F32","shape":[1],"data_offsets":[12,16]}})";
  e = open_error(write("ov3.safetensors", h2, std::string(16, '\0')));
  EXPECT_NE(e.find("overlap"), std::string::npos) << e;
}

// 200,000 tiny tensors: the validation is O(n log n) (it was quadratic). The check is the growth from 25,000 to
// 200,000 tensors (8x the tensors: about 9x the time; quadratic would be 64x), which holds on a loaded machine and
// under the sanitizers; without sanitizers the 200,000 must also load within 20 s.
TEST_F(SafetensorsTest, TwoHundredThousandTensorsLoadQuickly) {
  const auto load_seconds = [&](int n) {
    std::string h = "{";
    for (int i = 0; i < n; ++i) {
      if (i) h += ",";
      h += "\"t" + std::to_string(i) + "\":{\"dtype\":\"BF16\",\"shape\":[1],\"data_offsets\":[" +
           std::to_string(2 * i) + "," + std::to_string(2 * i + 2) + "]}";
    }
    h += "}";
    const std::string path = write("many" + std::to_string(n) + ".safetensors", h, std::string(2 * n, '\0'));
    const auto t0 = std::chrono::steady_clock::now();
    auto r = SafetensorsFile::open(path);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_TRUE(r.is_ok()) << r.message();
    if (r.is_ok()) {
      EXPECT_EQ((*r)->tensors().size(), static_cast<size_t>(n));
    }
    return s;
  };
  const double small = load_seconds(25000), large = load_seconds(200000);
  EXPECT_LT(large, 24.0 * small + 0.5) << "25,000 tensors: " << small << " s, 200,000: " << large << " s";
  if (!kSanitized) {
    EXPECT_LT(large, 20.0);
  }
}

TEST_F(SafetensorsTest, DuplicateNames) {
  std::string h = R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                  R"("a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})";
  std::string e = open_error(write("dup.safetensors", h, std::string(8, '\0')));
  EXPECT_NE(e.find("appears twice"), std::string::npos) << e;
}

TEST_F(SafetensorsTest, ShapeOverflow) {
  std::string h = R"({"a":{"dtype":"F32","shape":[4294967296,4294967296,4294967296],"data_offsets":[0,4]}})";
  std::string e = open_error(write("ovf.safetensors", h, std::string(4, '\0')));
  EXPECT_NE(e.find("overflow"), std::string::npos) << e;
}

TEST_F(SafetensorsTest, BeginAfterEndAndWrongTypes) {
  EXPECT_NE(open_error(write("b.safetensors", R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[8,4]}})",
                             std::string(8, '\0')))
                .find("begin"),
            std::string::npos);
  EXPECT_NE(open_error(write("n.safetensors", R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})",
                             std::string(8, '\0')))
                .find("non-negative"),
            std::string::npos);
  EXPECT_NE(open_error(write("x.safetensors", R"([1,2,3])", "")).find("object"), std::string::npos);
  EXPECT_NE(open_error(write("m.safetensors", R"({"a":{"shape":[1],"data_offsets":[0,4]}})", std::string(4, '\0')))
                .find("dtype"),
            std::string::npos);
}

TEST_F(SafetensorsTest, ShardedIndexLoadsAndValidates) {
  write("s1.safetensors", R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", std::string(4, '\0'));
  write("s2.safetensors", R"({"b":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", std::string(4, '\0'));
  std::string idx = (dir_ / "model.safetensors.index.json").string();
  ASSERT_TRUE(write_file(idx, R"({"metadata":{},"weight_map":{"a":"s1.safetensors","b":"s2.safetensors"}})").is_ok());
  auto ws = WeightStore::open(dir_.string());
  ASSERT_TRUE(ws.is_ok()) << ws.message();
  EXPECT_NE(ws->find("a"), nullptr);
  EXPECT_NE(ws->find("b"), nullptr);
  EXPECT_EQ(ws->find("c"), nullptr);

  // A tensor the index maps to a file that lacks it.
  ASSERT_TRUE(write_file(idx, R"({"weight_map":{"a":"s1.safetensors","zz":"s1.safetensors"}})").is_ok());
  auto bad = WeightStore::open(dir_.string());
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.message().find("\"zz\""), std::string::npos) << bad.message();

  // Path traversal, wrong types, malformed JSON, missing shard.
  for (const char* text : {R"({"weight_map":{"a":"../s1.safetensors"}})", R"({"weight_map":{"a":3}})",
                           R"({"weight_map":[]})", R"({"weight_map":{"a":"s1.safetensors")",
                           R"({"weight_map":{"a":"missing.safetensors"}})", R"({"weight_map":{}})"}) {
    ASSERT_TRUE(write_file(idx, text).is_ok());
    auto r = WeightStore::open(dir_.string());
    EXPECT_FALSE(r.is_ok()) << text;
    EXPECT_NE(r.message().find("safetensors"), std::string::npos) << r.message();
  }
}

TEST_F(SafetensorsTest, NoWeightsIsAClearError) {
  auto r = WeightStore::open(dir_.string());
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.message().find("--dummy-weights"), std::string::npos) << r.message();
}

TEST_F(SafetensorsTest, RandomCorruptionNeverCrashes) {
  // Flip bytes of a valid header at many positions: every result is either a clean load or an error.
  std::string h = R"({"a":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]},)"
                  R"("b":{"dtype":"BF16","shape":[3],"data_offsets":[16,22]}})";
  for (size_t pos = 0; pos < h.size(); ++pos) {
    for (char c : {'9', '"', '}', '-', '\0'}) {
      std::string m = h;
      m[pos] = c;
      auto r = SafetensorsFile::open(write("f.safetensors", m, std::string(22, '\x02')));
      if (!r.is_ok()) {
        EXPECT_FALSE(r.message().empty());
      }
    }
  }
}

}  // namespace
}  // namespace rl
