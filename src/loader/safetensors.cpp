#include "loader/safetensors.h"

#include <algorithm>
#include <unordered_set>

#include "core/json.h"

namespace rl {

int64_t TensorInfo::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string TensorInfo::shape_str() const {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

namespace {

bool parse_st_dtype(const std::string& s, DType* out) {
  if (s == "F32") { *out = DType::kF32; return true; }
  if (s == "F16") { *out = DType::kF16; return true; }
  if (s == "BF16") { *out = DType::kBF16; return true; }
  // Packed quantised weights: MXFP4 blocks/scales (U8), FP8 e4m3 weights; the architecture decodes them.
  if (s == "U8") { *out = DType::kU8; return true; }
  if (s == "F8_E4M3") { *out = DType::kFP8E4M3; return true; }
  return false;
}

// Multiplies with overflow detection.
bool mul_ok(uint64_t a, uint64_t b, uint64_t* out) { return !__builtin_mul_overflow(a, b, out); }

Status parse_entry(const std::string& path, const std::string& name, const Json& e, uint64_t data_size,
                   const unsigned char* data_base, TensorInfo* t) {
  auto err = [&](const std::string& m) { return Status::error(path + ": tensor \"" + name + "\": " + m); };
  if (!e.is_object()) return err("entry must be an object");
  auto dt = e.find("dtype");
  auto sh = e.find("shape");
  auto off = e.find("data_offsets");
  if (dt == e.end() || !dt->is_string()) return err("missing or non-string \"dtype\"");
  if (sh == e.end() || !sh->is_array()) return err("missing or non-array \"shape\"");
  if (off == e.end() || !off->is_array() || off->size() != 2) return err("\"data_offsets\" must be [begin, end]");
  std::string dts = dt->get<std::string>();
  if (!parse_st_dtype(dts, &t->dtype)) {
    return err("dtype " + dts + " is not supported (supported: F32, F16, BF16, U8, F8_E4M3)");
  }
  uint64_t numel = 1;
  for (const auto& d : *sh) {
    if (!d.is_number_unsigned()) return err("shape must hold non-negative integers");
    uint64_t v = d.get<uint64_t>();
    if (v > (uint64_t{1} << 40) || !mul_ok(numel, v, &numel)) return err("shape overflows");
    t->shape.push_back(static_cast<int64_t>(v));
  }
  for (const auto& o : *off) {
    if (!o.is_number_unsigned()) return err("data_offsets must be non-negative integers");
  }
  uint64_t b = (*off)[0].get<uint64_t>(), en = (*off)[1].get<uint64_t>();
  if (b > en) return err("data_offsets begin " + std::to_string(b) + " > end " + std::to_string(en));
  if (en > data_size) {
    return err("data_offsets end " + std::to_string(en) + " is past the end of the file (data region holds " +
               std::to_string(data_size) + " bytes)");
  }
  uint64_t want;
  if (!mul_ok(numel, dtype_size(t->dtype), &want)) return err("byte size overflows");
  if (want != en - b) {
    return err("shape " + t->shape_str() + " x " + dts + " needs " + std::to_string(want) +
               " bytes but data_offsets span " + std::to_string(en - b));
  }
  t->name = name;
  t->data = data_base + b;
  t->nbytes = static_cast<size_t>(en - b);
  t->file = path;
  return Status::ok();
}

// SAX handler that records the first top-level key seen twice; linear in the header.
struct TopLevelKeys : Json::json_sax_t {
  int depth = 0;
  std::unordered_set<std::string> seen;
  std::string duplicate;
  std::string error;

  bool key(string_t& k) override {
    if (depth == 1 && !seen.insert(k).second && duplicate.empty()) duplicate = k;
    return true;
  }
  bool start_object(std::size_t) override {
    ++depth;
    return true;
  }
  bool end_object() override {
    --depth;
    return true;
  }
  bool start_array(std::size_t) override {
    ++depth;
    return true;
  }
  bool end_array() override {
    --depth;
    return true;
  }
  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) override {
    error = e.what();
    return false;
  }
};

}  // namespace

Result<std::unique_ptr<SafetensorsFile>> SafetensorsFile::open(const std::string& path) {
  auto f = std::make_unique<SafetensorsFile>();
  RL_ASSIGN_OR_RETURN(f->file_, MappedFile::open(path));
  const size_t size = f->file_.size();
  if (size < 8) return Status::error(path + ": truncated: " + std::to_string(size) + " bytes, no header length");
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | f->file_.data()[i];
  if (n > kMaxSafetensorsHeader) {
    return Status::error(path + ": header length " + std::to_string(n) + " exceeds the limit of " +
                         std::to_string(kMaxSafetensorsHeader) + " bytes");
  }
  if (n > size - 8) {
    return Status::error(path + ": truncated: header length " + std::to_string(n) + " but only " +
                         std::to_string(size - 8) + " bytes follow");
  }
  std::string header(reinterpret_cast<const char*>(f->file_.data()) + 8, static_cast<size_t>(n));
  // Detect duplicate top-level names, which a JSON object parser would silently merge: a first SAX pass over
  // the keys. (nlohmann's parse-with-callback rescans the enclosing object at the end of every object, which
  // is quadratic in the number of tensors.)
  TopLevelKeys keys;
  if (!Json::sax_parse(header, &keys)) {
    return Status::error(path + ": malformed JSON header: " + keys.error);
  }
  const std::string& duplicate = keys.duplicate;
  Json j;
  try {
    j = Json::parse(header);
  } catch (const Json::exception& e) {
    return Status::error(path + ": malformed JSON header: " + e.what());
  }
  if (!duplicate.empty()) return Status::error(path + ": tensor \"" + duplicate + "\" appears twice in the header");
  if (!j.is_object()) return Status::error(path + ": header must be a JSON object");
  const uint64_t data_size = size - 8 - n;
  const unsigned char* base = f->file_.data() + 8 + n;
  std::vector<const TensorInfo*> by_offset;
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (it.key() == "__metadata__") {
      if (!it.value().is_object()) return Status::error(path + ": \"__metadata__\" must be an object");
      continue;
    }
    TensorInfo t;
    RL_RETURN_IF_ERROR(parse_entry(path, it.key(), it.value(), data_size, base, &t));
    auto [pos, inserted] = f->tensors_.emplace(it.key(), std::move(t));
    by_offset.push_back(&pos->second);
  }
  // Overlap check in O(n log n): sorted by start, a non-empty tensor overlaps an earlier one exactly when it
  // starts before the furthest end seen so far (empty tensors occupy no bytes and overlap nothing).
  std::sort(by_offset.begin(), by_offset.end(), [](const TensorInfo* a, const TensorInfo* b) {
    return a->data != b->data ? a->data < b->data : a->nbytes < b->nbytes;
  });
  const TensorInfo* furthest = nullptr;  // the non-empty tensor with the largest end so far
  for (const TensorInfo* t : by_offset) {
    if (t->nbytes == 0) continue;
    if (furthest != nullptr && t->data < furthest->data + furthest->nbytes) {
      return Status::error(path + ": tensors \"" + furthest->name + "\" and \"" + t->name + "\" overlap");
    }
    if (furthest == nullptr || t->data + t->nbytes > furthest->data + furthest->nbytes) furthest = t;
  }
  return f;
}

bool WeightStore::has_weights(const std::string& model_dir) {
  return file_exists(path_join(model_dir, "model.safetensors")) ||
         file_exists(path_join(model_dir, "model.safetensors.index.json"));
}

Result<WeightStore> WeightStore::open(const std::string& model_dir) {
  WeightStore ws;
  std::string index_path = path_join(model_dir, "model.safetensors.index.json");
  std::string single = path_join(model_dir, "model.safetensors");
  if (file_exists(index_path)) {
    RL_ASSIGN_OR_RETURN(Json idx, load_json_file(index_path));
    if (!idx.is_object() || !idx.contains("weight_map") || !idx["weight_map"].is_object()) {
      return Status::error(index_path + ": \"weight_map\" must be an object of tensor name → file name");
    }
    std::map<std::string, std::vector<std::string>> by_file;
    for (auto it = idx["weight_map"].begin(); it != idx["weight_map"].end(); ++it) {
      if (!it.value().is_string()) {
        return Status::error(index_path + ": weight_map entry \"" + it.key() + "\" must be a file name string");
      }
      std::string fname = it.value().get<std::string>();
      if (fname.empty() || fname.find('/') != std::string::npos || fname == "." || fname == "..") {
        return Status::error(index_path + ": weight_map entry \"" + it.key() + "\" names an invalid file \"" +
                             fname + "\" (must be a plain file name in the model folder)");
      }
      by_file[fname].push_back(it.key());
    }
    if (by_file.empty()) return Status::error(index_path + ": weight_map is empty");
    for (const auto& [fname, names] : by_file) {
      RL_ASSIGN_OR_RETURN(auto f, SafetensorsFile::open(path_join(model_dir, fname)));
      for (const auto& name : names) {
        auto t = f->tensors().find(name);
        if (t == f->tensors().end()) {
          return Status::error(index_path + ": tensor \"" + name + "\" is mapped to " + fname +
                               " but that file does not hold it");
        }
        ws.index_[name] = &t->second;
      }
      ws.files_.push_back(std::move(f));
    }
  } else if (file_exists(single)) {
    RL_ASSIGN_OR_RETURN(auto f, SafetensorsFile::open(single));
    for (const auto& [name, t] : f->tensors()) ws.index_[name] = &t;
    ws.files_.push_back(std::move(f));
  } else {
    return Status::error(model_dir + ": no model.safetensors or model.safetensors.index.json (use --dummy-weights "
                         "for random weights at the config's shapes)");
  }
  return ws;
}

const TensorInfo* WeightStore::find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : it->second;
}

std::vector<std::string> WeightStore::names() const {
  std::vector<std::string> out;
  for (const auto& [n, t] : index_) out.push_back(n);
  return out;
}

uint64_t WeightStore::total_bytes() const {
  uint64_t s = 0;
  for (const auto& [n, t] : index_) s += t->nbytes;
  return s;
}

}  // namespace rl
