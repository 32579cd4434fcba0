// Hostile model folders (issue 11): each case copies the tiny default model, breaks one thing (safetensors
// header, spans, dtypes, NaN/Inf/overflowing weights, absurd config values, hostile tokenizer.json, hostile chat
// templates and --messages files) and runs the real `ridgeline` binary on it under a time bound. The outcome
// must be a clean exit: 0, or 1 with "ridgeline: error: <what>" naming the problem. Never a signal (crash,
// abort, sanitizer report), never a hang. The cases are generated here; nothing is committed but this file.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <ostream>
#include <string>
#include <vector>

#include "core/json.h"

namespace rl {
namespace {

namespace fs = std::filesystem;

const fs::path kTiny = fs::path(RIDGELINE_SOURCE_DIR) / "models" / "ridgeline-tiny";
const std::string kBinary = std::string(RIDGELINE_BINARY_DIR) + "/ridgeline";

std::string read_all(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}
void write_all(const fs::path& p, const std::string& bytes) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// The tiny model's safetensors, split into its header (parsed) and data region; read once.
struct Weights {
  Json header;
  std::string data;
};
const Weights& tiny_weights() {
  static const Weights w = [] {
    const std::string bytes = read_all(kTiny / "model.safetensors");
    uint64_t n = 0;
    for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(bytes[static_cast<size_t>(i)]);
    Weights r;
    r.header = Json::parse(bytes.substr(8, n));
    r.data = bytes.substr(8 + n);
    return r;
  }();
  return w;
}
std::string pack_safetensors(const std::string& header_text, const std::string& data) {
  std::string out(8, '\0');
  const uint64_t n = header_text.size();
  for (int i = 0; i < 8; ++i) out[static_cast<size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out + header_text + data;
}

// Fills tensor `name` of the tiny weights with a repeated 16-bit pattern (they are bf16).
std::string weights_with_pattern(const std::string& name, uint16_t pattern, size_t max_elems = SIZE_MAX) {
  const Weights& w = tiny_weights();
  std::string data = w.data;
  const Json& t = w.header.at(name);
  const size_t b = t["data_offsets"][0].get<size_t>(), e = t["data_offsets"][1].get<size_t>();
  for (size_t k = b, i = 0; k + 1 < e && i < max_elems; k += 2, ++i) {
    data[k] = static_cast<char>(pattern & 0xff);
    data[k + 1] = static_cast<char>(pattern >> 8);
  }
  return pack_safetensors(w.header.dump(), data);
}

enum class Run { kGenerate, kGenerateSampled, kTemplate, kTokenize };

struct Case {
  std::string name;
  std::function<void(const fs::path& dir)> make;  // breaks the copied folder
  Run run = Run::kGenerate;
  std::string expect;  // "" = must succeed; "*" = either, cleanly; else must fail with this in its error message
};

void patch_json_file(const fs::path& p, const Json& patch) {
  Json j = Json::parse(read_all(p));
  j.merge_patch(patch);
  write_all(p, j.dump(2));
}

// --- case builders ---
Case config_case(const std::string& name, const Json& patch, const std::string& expect) {
  return {"config_" + name, [patch](const fs::path& d) { patch_json_file(d / "config.json", patch); },
          Run::kGenerate, expect};
}
Case config_text_case(const std::string& name, const std::string& text, const std::string& expect) {
  return {"config_" + name, [text](const fs::path& d) { write_all(d / "config.json", text); }, Run::kGenerate,
          expect};
}
Case weights_case(const std::string& name, std::function<std::string()> bytes, const std::string& expect,
                  Run run = Run::kGenerate) {
  return {"weights_" + name, [bytes](const fs::path& d) {
            fs::remove(d / "model.safetensors");
            write_all(d / "model.safetensors", bytes());
          },
          run, expect};
}
// A header edited as JSON, the data region kept.
Case header_case(const std::string& name, std::function<void(Json&)> edit, const std::string& expect) {
  return weights_case(name, [edit] {
    Json h = tiny_weights().header;
    edit(h);
    return pack_safetensors(h.dump(), tiny_weights().data);
  }, expect);
}
Case tokenizer_case(const std::string& name, const std::string& text, const std::string& expect) {
  return {"tokenizer_" + name, [text](const fs::path& d) { write_all(d / "tokenizer.json", text); },
          Run::kTokenize, expect};
}
Case tokenizer_patch_case(const std::string& name, const Json& patch, const std::string& expect) {
  return {"tokenizer_" + name, [patch](const fs::path& d) { patch_json_file(d / "tokenizer.json", patch); },
          Run::kTokenize, expect};
}
// The tiny tokenizer.json with `field` replaced by raw JSON text (for values too deep to build as Json).
Case tokenizer_raw_field_case(const std::string& name, const std::string& field, const std::string& raw,
                              const std::string& expect) {
  return {"tokenizer_" + name, [field, raw](const fs::path& d) {
            Json j = Json::parse(read_all(d / "tokenizer.json"));
            j.erase(field);
            std::string text = j.dump();
            text.insert(1, "\"" + field + "\":" + raw + ",");
            write_all(d / "tokenizer.json", text);
          },
          Run::kTokenize, expect};
}
Case template_case(const std::string& name, const std::string& source, const std::string& expect) {
  return {"template_" + name, [source](const fs::path& d) {
            patch_json_file(d / "tokenizer_config.json", Json{{"chat_template", source}});
          },
          Run::kTemplate, expect};
}
Case messages_case(const std::string& name, const std::string& messages, const std::string& expect) {
  return {"messages_" + name, [messages](const fs::path& d) { write_all(d / "messages.json", messages); },
          Run::kTemplate, expect};
}

std::string nested(const std::string& open, const std::string& inner, const std::string& close, int depth) {
  std::string s;
  s.reserve((open.size() + close.size()) * static_cast<size_t>(depth) + inner.size());
  for (int k = 0; k < depth; ++k) s += open;
  s += inner;
  for (int k = 0; k < depth; ++k) s += close;
  return s;
}
std::string repeat(const std::string& s, int n) {
  std::string out;
  for (int k = 0; k < n; ++k) out += s;
  return out;
}

std::vector<Case> all_cases() {
  std::vector<Case> c;
  const std::string kConfig = "config.json";
  // ---- config.json: every numeric field out of range, wrong JSON types, structure ----
  const std::vector<std::tuple<std::string, Json, std::string>> config_values = {
      {"head_dim_0", {{"head_dim", 0}}, "\"head_dim\" must be an integer in [1, 1024], got 0"},
      {"head_dim_negative", {{"head_dim", -64}}, "\"head_dim\" must be an integer in [1, 1024]"},
      {"head_dim_odd", {{"head_dim", 63}}, "head_dim must be even"},
      {"head_dim_huge", {{"head_dim", 1 << 20}}, "\"head_dim\""},
      {"head_dim_string", {{"head_dim", "64"}}, "\"head_dim\""},
      {"head_dim_float", {{"head_dim", 64.5}}, "\"head_dim\""},
      {"max_pos_0", {{"max_position_embeddings", 0}}, "\"max_position_embeddings\" must be an integer in [1, "},
      {"max_pos_negative", {{"max_position_embeddings", -1024}}, "\"max_position_embeddings\""},
      {"max_pos_huge", {{"max_position_embeddings", 1e30}}, "\"max_position_embeddings\""},
      {"rope_parameters_string", {{"rope_parameters", "fast"}}, "\"rope_parameters\" must be an object or null"},
      {"rope_parameters_array", {{"rope_parameters", {1, 2}}}, "\"rope_parameters\" must be an object or null"},
      {"rope_theta_negative", {{"rope_parameters", {{"rope_theta", -1.0}}}}, "\"rope_theta\" must be a number in (0, "},
      {"rope_theta_zero", {{"rope_theta", 0}}, "\"rope_theta\""},
      {"rope_type_number", {{"rope_parameters", {{"rope_type", 3}}}}, "\"rope_type\" must be a string"},
      {"rope_type_dynamic", {{"rope_parameters", {{"rope_type", "dynamic"}}}}, "\"dynamic\" is not supported"},
      {"rope_yarn_factor_below_1", {{"rope_parameters", {{"rope_type", "yarn"}, {"factor", 0.5}}}}, "\"factor\""},
      {"rope_llama3_bad_factor", {{"rope_parameters", {{"rope_type", "llama3"}, {"factor", -2}, {"original_max_position_embeddings", 512}}}}, "\"factor\""},
      {"rope_llama3_no_original", {{"rope_parameters", {{"rope_type", "llama3"}, {"factor", 2}}}}, "original_max_position_embeddings"},
      {"rope_scaling_string", {{"rope_scaling", "linear"}}, "\"rope_scaling\" must be an object or null"},
      {"vocab_0", {{"vocab_size", 0}}, "\"vocab_size\" must be an integer in [1, "},
      {"vocab_negative", {{"vocab_size", -6144}}, "\"vocab_size\""},
      {"vocab_huge", {{"vocab_size", int64_t{1} << 40}}, "\"vocab_size\""},
      {"vocab_string", {{"vocab_size", "many"}}, "\"vocab_size\""},
      {"vocab_u64_max", {{"vocab_size", UINT64_MAX}}, "\"vocab_size\""},
      {"hidden_0", {{"hidden_size", 0}}, "\"hidden_size\""},
      {"hidden_huge", {{"hidden_size", 1 << 30}}, "\"hidden_size\""},
      {"intermediate_negative", {{"intermediate_size", -1}}, "\"intermediate_size\""},
      {"layers_0", {{"num_hidden_layers", 0}}, "\"num_hidden_layers\""},
      {"layers_huge", {{"num_hidden_layers", 1000000}}, "\"num_hidden_layers\""},
      {"heads_0", {{"num_attention_heads", 0}}, "\"num_attention_heads\""},
      {"kv_heads_0", {{"num_key_value_heads", 0}}, "\"num_key_value_heads\""},
      {"kv_heads_not_divisor", {{"num_key_value_heads", 3}}, "multiple of num_key_value_heads"},
      {"rms_eps_0", {{"rms_norm_eps", 0}}, "\"rms_norm_eps\""},
      {"rms_eps_negative", {{"rms_norm_eps", -1e-6}}, "\"rms_norm_eps\""},
      {"sliding_window_negative", {{"sliding_window", -5}, {"use_sliding_window", true}}, "\"sliding_window\""},
      {"eos_negative", {{"eos_token_id", -1}}, "\"eos_token_id\""},
      {"eos_list_string", {{"eos_token_id", {0, "x"}}}, "\"eos_token_id\""},
      {"bos_float", {{"bos_token_id", 1.5}}, "\"bos_token_id\""},
      {"architectures_empty", {{"architectures", Json::array()}}, "\"architectures\""},
      {"architectures_number", {{"architectures", {7}}}, "\"architectures\""},
      {"architecture_unknown", {{"architectures", {"FalconForCausalLM"}}}, "is not supported"},
      {"hidden_act_gelu", {{"hidden_act", "gelu"}}, "hidden_act \"gelu\""},
      {"hidden_act_number", {{"hidden_act", 1}}, "\"hidden_act\" must be a string"},
      {"tie_string", {{"tie_word_embeddings", "yes"}}, "\"tie_word_embeddings\" must be a boolean"},
      {"dtype_number", {{"dtype", 16}}, "\"dtype\" must be a string"},
      {"shape_mismatch", {{"intermediate_size", 512}}, "but the config implies"},
  };
  for (const auto& [name, patch, expect] : config_values) c.push_back(config_case(name, patch, expect));
  c.push_back(config_text_case("not_json", "{\"architectures\": [", "malformed JSON"));
  c.push_back(config_text_case("array", "[1, 2, 3]", "must be a JSON object"));
  c.push_back(config_text_case("empty", "", "malformed JSON"));
  c.push_back(config_text_case("deep_field", "{\"x\":" + nested("[", "", "]", 100000) + "," +
                                                 read_all(kTiny / kConfig).substr(1),
                               ""));  // an unknown deep field is ignored; parsing and teardown do not recurse
  Json without_head_dim = Json::parse(read_all(kTiny / kConfig));
  without_head_dim.erase("head_dim");
  c.push_back(config_text_case("deep_head_dim", "{\"head_dim\":" + nested("[", "", "]", 100000) + "," +
                                                    without_head_dim.dump().substr(1),
                               "\"head_dim\" must be an integer in [1, 1024], got an array"));
  c.push_back({"generation_config_top_p", [](const fs::path& d) {
                 write_all(d / "generation_config.json", R"({"top_p": 7})");
               },
               Run::kGenerate, "\"top_p\" must be a number in [0, 1]"});
  c.push_back({"generation_config_temperature", [](const fs::path& d) {
                 write_all(d / "generation_config.json", R"({"temperature": -1})");
               },
               Run::kGenerate, "\"temperature\""});

  // ---- model.safetensors: header, spans, dtypes ----
  const std::string data = "";
  c.push_back(weights_case("empty_file", [] { return std::string(); }, "no header length"));
  c.push_back(weights_case("truncated_length", [] { return std::string("\x10\x00\x00", 3); }, "truncated"));
  c.push_back(weights_case("header_past_end", [] { return pack_safetensors("{}", "").substr(0, 8) + "{"; },
                           "truncated"));
  c.push_back(weights_case("header_length_huge", [] {
    std::string s(8, '\xff');
    return s + "{}";
  }, "exceeds the limit"));
  c.push_back(weights_case("header_not_json", [] { return pack_safetensors("{not json", "xx"); }, "malformed JSON"));
  c.push_back(weights_case("header_array", [] { return pack_safetensors("[]", ""); }, "must be a JSON object"));
  c.push_back(weights_case("header_empty_object", [] { return pack_safetensors("{}", ""); }, "not found"));
  c.push_back(weights_case("truncated_data", [] {
    const Weights& w = tiny_weights();
    return pack_safetensors(w.header.dump(), w.data.substr(0, w.data.size() / 2));
  }, "past the end of the file"));
  c.push_back(weights_case("deep_metadata", [] {
    Json header = tiny_weights().header;
    header.erase("__metadata__");
    std::string h = header.dump();
    h.insert(1, "\"__metadata__\":{\"x\":" + nested("[", "", "]", 100000) + "},");
    return pack_safetensors(h, tiny_weights().data);
  }, ""));
  c.push_back(weights_case("200k_tiny_tensors", [] {
    std::string h = tiny_weights().header.dump();
    std::string extra;
    for (int i = 0; i < 200000; ++i) {
      extra += "\"x" + std::to_string(i) + "\":{\"dtype\":\"BF16\",\"shape\":[0],\"data_offsets\":[0,0]},";
    }
    h.insert(1, extra);
    return pack_safetensors(h, tiny_weights().data);
  }, ""));
  const std::string kEmbed = "model.embed_tokens.weight";
  c.push_back(header_case("dtype_i8", [=](Json& h) { h[kEmbed]["dtype"] = "I8"; }, "dtype I8 is not supported"));
  c.push_back(header_case("dtype_f64", [=](Json& h) { h[kEmbed]["dtype"] = "F64"; }, "is not supported"));
  c.push_back(header_case("dtype_number", [=](Json& h) { h[kEmbed]["dtype"] = 5; }, "\"dtype\""));
  c.push_back(header_case("dtype_f32_span", [=](Json& h) { h[kEmbed]["dtype"] = "F32"; }, "needs"));
  c.push_back(header_case("shape_negative", [=](Json& h) { h[kEmbed]["shape"] = {-1, 256}; }, "shape"));
  c.push_back(header_case("shape_string", [=](Json& h) { h[kEmbed]["shape"] = "big"; }, "shape"));
  c.push_back(header_case("shape_overflow", [=](Json& h) {
    h[kEmbed]["shape"] = {uint64_t{1} << 40, uint64_t{1} << 40};
  }, "overflows"));
  c.push_back(header_case("shape_wrong", [=](Json& h) {
    h[kEmbed]["shape"] = {256, 6144};
  }, "but the config implies"));
  c.push_back(header_case("offsets_reversed", [=](Json& h) {
    auto& o = h[kEmbed]["data_offsets"];
    o = {o[1], o[0]};
  }, "data_offsets begin"));
  c.push_back(header_case("offsets_past_end", [=](Json& h) {
    h[kEmbed]["data_offsets"][1] = uint64_t{1} << 50;
  }, "past the end"));
  c.push_back(header_case("offsets_negative", [=](Json& h) { h[kEmbed]["data_offsets"][0] = -2; }, "data_offsets"));
  c.push_back(header_case("offsets_three", [=](Json& h) { h[kEmbed]["data_offsets"].push_back(3); },
                          "\"data_offsets\" must be [begin, end]"));
  c.push_back(header_case("offsets_missing", [=](Json& h) { h[kEmbed].erase("data_offsets"); }, "data_offsets"));
  c.push_back(header_case("entry_not_object", [=](Json& h) { h[kEmbed] = 3; }, "entry must be an object"));
  c.push_back(header_case("metadata_array", [=](Json& h) { h["__metadata__"] = {1}; }, "__metadata__"));
  c.push_back(header_case("overlap", [=](Json& h) {
    h["model.norm.weight"]["data_offsets"] = h[kEmbed]["data_offsets"];
    h["model.norm.weight"]["data_offsets"][1] = h[kEmbed]["data_offsets"][0].get<uint64_t>() + 512;
  }, "overlap"));
  c.push_back(header_case("missing_tensor", [=](Json& h) { h.erase("model.norm.weight"); }, "not found"));
  c.push_back(weights_case("duplicate_name", [] {
    std::string h = tiny_weights().header.dump();
    h.insert(1, "\"model.norm.weight\":{\"dtype\":\"BF16\",\"shape\":[256],\"data_offsets\":[0,512]},");
    return pack_safetensors(h, tiny_weights().data);
  }, "appears twice"));
  // Sharded index files.
  const auto index_case = [&](const std::string& name, const std::string& index, const std::string& expect) {
    return Case{"index_" + name, [index](const fs::path& d) {
                  fs::rename(d / "model.safetensors", d / "shard.safetensors");
                  write_all(d / "model.safetensors.index.json", index);
                },
                Run::kGenerate, expect};
  };
  c.push_back(index_case("not_json", "{", "malformed JSON"));
  c.push_back(index_case("no_weight_map", "{}", "\"weight_map\""));
  c.push_back(index_case("traversal", R"({"weight_map":{"model.norm.weight":"../etc/passwd"}})", "invalid file"));
  c.push_back(index_case("missing_shard", R"({"weight_map":{"model.norm.weight":"nope.safetensors"}})", "nope"));
  c.push_back(index_case("wrong_shard", R"({"weight_map":{"no.such.tensor":"shard.safetensors"}})",
                         "does not hold it"));
  c.push_back(index_case("entry_number", R"({"weight_map":{"model.norm.weight":7}})", "must be a file name"));
  // Numerically broken weights: the request fails with a clear error, greedy (device argmax) and sampled
  // (host sampler) alike; nothing aborts.
  for (Run run : {Run::kGenerate, Run::kGenerateSampled}) {
    const std::string s = run == Run::kGenerate ? "_greedy" : "_sampled";
    c.push_back(weights_case("nan_embeddings" + s, [=] { return weights_with_pattern(kEmbed, 0x7fc0); },
                             "non-finite logits", run));
    c.push_back(weights_case("inf_norm" + s, [] { return weights_with_pattern("model.norm.weight", 0x7f80); },
                             "non-finite logits", run));
    c.push_back(weights_case("neg_inf_norm" + s, [] { return weights_with_pattern("model.norm.weight", 0xff80); },
                             "non-finite logits", run));
    c.push_back(weights_case("nan_one_weight" + s, [] {
      return weights_with_pattern("model.layers.0.mlp.down_proj.weight", 0x7fc1, 1);
    }, "non-finite logits", run));
    // Finite bf16 maxima (3.39e38): the matmul overflows to Inf, then NaN.
    c.push_back(weights_case("bf16_max_down_proj" + s, [] {
      return weights_with_pattern("model.layers.0.mlp.down_proj.weight", 0x7f7f);
    }, "non-finite logits", run));
    // Maximal embeddings: RMSNorm's sum of squares overflows and the layer input may come out finite (zero);
    // either outcome is fine as long as it is clean.
    c.push_back(weights_case("bf16_max_embeddings" + s, [=] { return weights_with_pattern(kEmbed, 0x7f7f); }, "*",
                             run));
  }

  // ---- tokenizer.json ----
  c.push_back(tokenizer_case("not_json", "{\"model\":", "malformed JSON"));
  c.push_back(tokenizer_case("array", "[]", "must be a JSON object"));
  c.push_back(tokenizer_case("empty", "", "malformed JSON"));
  c.push_back(tokenizer_patch_case("no_model", {{"model", nullptr}}, "missing \"model\""));
  c.push_back(tokenizer_patch_case("unigram", {{"model", {{"type", "Unigram"}}}}, "Unigram"));
  c.push_back(tokenizer_patch_case("vocab_id_huge", {{"model", {{"vocab", {{"zzz", int64_t{1} << 40}}}}}},
                                   "invalid id"));
  c.push_back(tokenizer_patch_case("vocab_id_negative", {{"model", {{"vocab", {{"zzz", -3}}}}}}, "invalid id"));
  c.push_back(tokenizer_patch_case("vocab_id_string", {{"model", {{"vocab", {{"zzz", "1"}}}}}}, "invalid id"));
  c.push_back(tokenizer_patch_case("merges_unknown", {{"model", {{"merges", {"qqq rrr"}}}}}, "merges"));
  c.push_back(tokenizer_patch_case("merges_number", {{"model", {{"merges", {7}}}}}, "merges"));
  c.push_back(tokenizer_patch_case("dropout", {{"model", {{"dropout", 0.5}}}}, "dropout"));
  c.push_back(tokenizer_patch_case("bad_regex", {{"pre_tokenizer", {{"type", "Split"}, {"pattern", {{"Regex", "(("}}}, {"behavior", "Isolated"}}}}, "Split"));
  c.push_back(tokenizer_patch_case("unknown_normalizer", {{"normalizer", {{"type", "BertNormalizer"}}}}, "not supported"));
  c.push_back(tokenizer_patch_case("normalizer_number", {{"normalizer", 5}}, "must be an object"));
  c.push_back(tokenizer_patch_case("decoder_unknown", {{"decoder", {{"type", "WordPiece"}}}}, "not supported"));
  c.push_back(tokenizer_patch_case("split_behavior", {{"pre_tokenizer", {{"type", "Split"}, {"pattern", {{"String", " "}}}, {"behavior", {1, 2}}}}}, "unknown split behavior [1,2]"));
  c.push_back(tokenizer_patch_case("added_tokens_object", {{"added_tokens", {{"a", 1}}}}, "added_tokens"));
  c.push_back(tokenizer_patch_case("added_token_id_huge", {{"added_tokens", {{{"id", int64_t{1} << 40}, {"content", "<x>"}}}}}, "added_tokens"));
  c.push_back(tokenizer_patch_case("template_undefined_token", {{"post_processor", {{"type", "TemplateProcessing"}, {"single", {{{"SpecialToken", {{"id", "<nope>"}}}}}}}}}, "not defined"));
  c.push_back(tokenizer_raw_field_case("normalizer_sequence_100k", "normalizer",
                                       nested(R"({"type":"Sequence","normalizers":[)", "", "]}", 100000),
                                       "Sequence nested deeper than 32 levels"));
  c.push_back(tokenizer_raw_field_case("pre_tokenizer_sequence_100k", "pre_tokenizer",
                                       nested(R"({"type":"Sequence","pretokenizers":[)", "", "]}", 100000),
                                       "Sequence nested deeper than 32 levels"));
  c.push_back(tokenizer_raw_field_case("decoder_sequence_100k", "decoder",
                                       nested(R"({"type":"Sequence","decoders":[)", "", "]}", 100000),
                                       "Sequence nested deeper than 32 levels"));
  c.push_back(tokenizer_raw_field_case("post_processor_sequence_100k", "post_processor",
                                       nested(R"({"type":"Sequence","processors":[)", "", "]}", 100000),
                                       "Sequence nested deeper than 32 levels"));
  c.push_back(tokenizer_raw_field_case("deep_unknown_field", "truncation", nested("[", "", "]", 200000), ""));
  c.push_back(tokenizer_raw_field_case("deep_added_tokens", "added_tokens", nested("[", "", "]", 200000),
                                       "added_tokens"));
  c.push_back(tokenizer_raw_field_case("sequence_wide", "normalizer",
                                       R"({"type":"Sequence","normalizers":[)" +
                                           repeat(R"({"type":"Lowercase"},)", 20000) + R"({"type":"NFC"}]})",
                                       ""));
  c.push_back({"tokenizer_config_deep", [](const fs::path& d) {
                 write_all(d / "tokenizer_config.json", "{\"x\":" + nested("{\"a\":", "1", "}", 100000) + "}");
               },
               Run::kTokenize, ""});

  // ---- chat templates (tokenizer_config.json chat_template) ----
  std::string filters = "{{ 'x'";
  for (int k = 0; k < 20000; ++k) filters += "|trim";
  c.push_back(template_case("20000_filters", filters + " }}", "expression nested too deeply"));
  c.push_back(template_case("20000_plus", "{{ 1" + repeat(" + 1", 20000) + " }}", "nested too deeply"));
  c.push_back(template_case("20000_attrs", "{{ messages" + repeat(".x", 20000) + " }}", "nested too deeply"));
  c.push_back(template_case("20000_subscripts", "{{ messages" + repeat("[0]", 20000) + " }}", "nested too deeply"));
  c.push_back(template_case("20000_parens", "{{ " + nested("(", "1", ")", 20000) + " }}", "nested too deeply"));
  c.push_back(template_case("20000_lists", "{{ " + nested("[", "1", "]", 20000) + " }}", "nested too deeply"));
  c.push_back(template_case("20000_ifs", nested("{% if true %}", "x", "{% endif %}", 20000), "nested too deeply"));
  c.push_back(template_case("20000_nots", "{{ " + repeat("not ", 20000) + "x }}", "nested too deeply"));
  c.push_back(template_case("million_deep_list",
                            "{% set ns = namespace(x=[]) %}{% for i in range(1000000) %}{% set ns.x = [ns.x] %}"
                            "{% endfor %}",
                            "nested deeper than 128 levels"));
  c.push_back(template_case("million_deep_dict",
                            "{% set ns = namespace(x={}) %}{% for i in range(1000000) %}"
                            "{% set ns.x = {'k': ns.x} %}{% endfor %}",
                            "nested deeper than 128 levels"));
  c.push_back(template_case("namespace_chain",
                            "{% set head = namespace() %}{% set ns = namespace(cur=head) %}"
                            "{% for i in range(1000000) %}{% set n = namespace() %}{% set t = ns.cur %}"
                            "{% set t.next = n %}{% set ns.cur = n %}{% endfor %}",
                            ""));  // renders; the chain is freed without recursion
  c.push_back(template_case("namespace_cycle", "{% set ns = namespace() %}{% set ns.me = ns %}{{ ns.me.me }}", ""));
  c.push_back(template_case("huge_output", "{{ 'x' * 100000000000 }}", "output limit exceeded"));
  c.push_back(template_case("doubling", "{% set ns = namespace(s='x') %}{% for i in range(64) %}"
                                        "{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
                            "output limit exceeded"));
  c.push_back(template_case("many_prints", "{% for i in range(200) %}{% for j in range(200) %}{{ 'abcdefghij' * 100 }}"
                                           "{% endfor %}{% endfor %}",
                            "output limit exceeded"));
  c.push_back(template_case("range_2m", "{{ range(2000000)|length }}", "more than 1048576 items"));
  c.push_back(template_case("print_repeated_list", "{% set s = 'x' * 1000000 %}{{ [s] * 1000 }}",
                            "output limit exceeded"));
  c.push_back(template_case("loop_cube", "{% for a in range(1000) %}{% for b in range(1000) %}"
                                         "{% for c in range(1000) %}{% endfor %}{% endfor %}{% endfor %}",
                            "loop limit exceeded"));
  c.push_back(template_case("range_huge", "{{ range(100000000000)|length }}", "loop limit exceeded"));
  c.push_back(template_case("quadratic_concat", "{% set ns = namespace(s='') %}{% for i in range(1000000) %}"
                                                "{% set ns.s = ns.s ~ 'x' %}{% endfor %}",
                            "work limit exceeded"));
  c.push_back(template_case("quadratic_list", "{% set ns = namespace(l=[]) %}{% for i in range(1000000) %}"
                                              "{% set ns.l = ns.l + [i] %}{% endfor %}",
                            "work limit exceeded"));
  c.push_back(template_case("quadratic_search", "{% set h = 'a' * 16000000 %}{% set n = 'a' * 8000000 ~ 'b' %}"
                                                "{{ n in h }}",
                            ""));
  c.push_back(template_case("macro_recursion", "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}",
                            "recursion limit exceeded"));
  c.push_back(template_case("macro_deep_body", "{% macro f(n) %}" + nested("{% if true %}", "{{ f(n + 1) }}",
                                                                             "{% endif %}", 100) +
                                                   "{% endmacro %}{{ f(0) }}",
                            "nested too deeply"));
  c.push_back(template_case("string_loop", "{% for c in 'x' * 30000000 %}{% endfor %}", "loop limit exceeded"));
  c.push_back(template_case("deep_tojson", "{% set ns = namespace(x=1) %}{% for i in range(120) %}"
                                           "{% set ns.x = [ns.x] %}{% endfor %}{{ ns.x|tojson }}",
                            ""));
  c.push_back(template_case("unclosed", "{% for m in messages %}", "unclosed"));
  c.push_back(template_case("include", "{% include 'x' %}", "not allowed"));
  c.push_back(template_case("raise", "{{ raise_exception('no system messages') }}", "no system messages"));
  c.push_back(template_case("strftime_huge", "{{ strftime_now('%c' * 1000000) }}", "strftime_now"));
  c.push_back(template_case("split_huge", "{{ ('a,' * 10000000).split(',')|length }}", "more than 1048576 parts"));
  c.push_back(template_case("list_huge", "{{ ([1] * 100000000)|length }}", "loop limit exceeded"));
  c.push_back(template_case("list_2m", "{{ ([1] * 2000000)|length }}", "more than 1048576 items"));
  c.push_back(template_case("list_doubling", "{% set ns = namespace(l=[1]) %}{% for i in range(40) %}"
                                             "{% set ns.l = ns.l + ns.l %}{% endfor %}",
                            "more than 1048576 items"));
  c.push_back(template_case("chars_huge", "{{ ('x' * 20000000)|list|length }}", "more than 1048576 items"));
  c.push_back(template_case("repeat_overflow", "{{ ('x' * 1000000) * 100000000000000 }}", "output limit exceeded"));
  c.push_back({"template_not_string", [](const fs::path& d) {
                 patch_json_file(d / "tokenizer_config.json", Json{{"chat_template", 42}});
               },
               Run::kTemplate, "chat_template"});
  c.push_back({"template_list_bad", [](const fs::path& d) {
                 patch_json_file(d / "tokenizer_config.json", Json{{"chat_template", {{{"name", 1}}}}});
               },
               Run::kTemplate, "chat_template"});
  c.push_back({"template_jinja_file", [](const fs::path& d) {
                 write_all(d / "chat_template.jinja", nested("{% for x in y %}", "", "{% endfor %}", 50000));
               },
               Run::kTemplate, "nested too deeply"});
  c.push_back({"tokenizer_config_not_json", [](const fs::path& d) {
                 write_all(d / "tokenizer_config.json", "{\"chat_template\": ");
               },
               Run::kTemplate, "malformed JSON"});

  // ---- --messages files ----
  c.push_back(messages_case("nested_20000", "[{\"role\":\"user\",\"content\":" + nested("[", "", "]", 20000) + "}]",
                            "messages[0].content"));
  c.push_back(messages_case("nested_object_20000",
                            "[{\"role\":\"user\",\"content\":\"hi\",\"x\":" + nested("{\"a\":", "1", "}", 20000) + "}]",
                            "nested deeper than 128 levels"));
  c.push_back(messages_case("top_level_deep", nested("[", "", "]", 20000), "nested deeper than 128 levels"));
  c.push_back(messages_case("not_json", "[{", "malformed JSON"));
  c.push_back(messages_case("object", "{\"role\":\"user\"}", "messages must be a JSON array"));
  c.push_back(messages_case("content_number", "[{\"role\":\"user\",\"content\":5}]", "unsupported operand"));
  c.push_back(messages_case("many_messages", "[" + repeat("{\"role\":\"user\",\"content\":\"hi\"},", 100000) +
                                                 "{\"role\":\"user\",\"content\":\"end\"}]",
                            ""));
  return c;
}

struct Outcome {
  int status = 0;  // exit code, or 128 + signal
  bool timed_out = false;
  std::string err;
};

// Runs the binary with a wall-clock bound; output to files in `dir`.
Outcome run(const std::vector<std::string>& args, const fs::path& dir, int seconds) {
  const fs::path out = dir / "stdout.txt", err = dir / "stderr.txt";
  pid_t pid = fork();
  if (pid == 0) {
    FILE* o = std::freopen(out.c_str(), "w", stdout);
    FILE* e = std::freopen(err.c_str(), "w", stderr);
    if (o == nullptr || e == nullptr) _exit(127);
    std::vector<char*> argv;
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  Outcome r;
  int st = 0;
  for (int waited_ms = 0;; waited_ms += 20) {
    if (waitpid(pid, &st, WNOHANG) == pid) break;
    if (waited_ms > seconds * 1000) {
      kill(pid, SIGKILL);
      waitpid(pid, &st, 0);
      r.timed_out = true;
      break;
    }
    usleep(20000);
  }
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  r.err = read_all(err);
  return r;
}

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

class HostileModel : public ::testing::TestWithParam<Case> {};

TEST_P(HostileModel, FailsCleanlyOrRuns) {
  const Case& c = GetParam();
  const fs::path dir = fs::temp_directory_path() / ("rl_hostile_" + std::to_string(getpid()) + "_" + c.name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  for (const auto& e : fs::directory_iterator(kTiny)) {
    if (e.path().filename() == "model.safetensors") {
      fs::create_symlink(e.path(), dir / "model.safetensors");  // 15 MB: linked unless a case rewrites it
    } else if (e.path().filename() != "README.md") {
      fs::copy_file(e.path(), dir / e.path().filename());
    }
  }
  write_all(dir / "messages.json", R"([{"role":"user","content":"Hello"}])");
  c.make(dir);
  std::vector<std::string> args = {kBinary};
  switch (c.run) {
    case Run::kGenerate:
    case Run::kGenerateSampled:
      args.insert(args.end(), {"generate", "-m", dir.string(), "--prompt", "Hello there", "--max-tokens", "3",
                               "--temperature", c.run == Run::kGenerate ? "0" : "0.8", "--seed", "1"});
      break;
    case Run::kTemplate:
      args.insert(args.end(), {"template", "-m", dir.string(), "--messages", (dir / "messages.json").string(),
                               "--add-generation-prompt"});
      break;
    case Run::kTokenize:
      args.insert(args.end(), {"tokenize", "-m", dir.string(), "Hello there, <|im_start|> world"});
      break;
  }
  // Generous for the asan preset on a loaded 2-core machine; a healthy case takes well under a second.
  const Outcome o = run(args, dir, 120);
  EXPECT_FALSE(o.timed_out) << c.name << ": no answer within 120 s";
  EXPECT_LT(o.status, 2) << c.name << ": exit status " << o.status << "\n" << o.err.substr(0, 4000);
  if (c.expect == "*") {
    if (o.status == 1) {
      EXPECT_NE(o.err.find("ridgeline: error: "), std::string::npos) << c.name << ": " << o.err;
    }
  } else if (c.expect.empty()) {
    EXPECT_EQ(o.status, 0) << c.name << ": " << o.err.substr(0, 2000);
  } else {
    EXPECT_EQ(o.status, 1) << c.name;
    EXPECT_NE(o.err.find("ridgeline: error: "), std::string::npos) << c.name << ": " << o.err.substr(0, 2000);
    EXPECT_NE(o.err.find(c.expect), std::string::npos)
        << c.name << ": expected \"" << c.expect << "\" in:\n" << o.err.substr(0, 2000);
  }
  std::error_code ec;
  fs::remove_all(dir, ec);
}

INSTANTIATE_TEST_SUITE_P(Cases, HostileModel, ::testing::ValuesIn(all_cases()),
                         [](const ::testing::TestParamInfo<Case>& i) { return i.param.name; });

TEST(HostileModelSuite, HasAtLeastOneHundredCases) { EXPECT_GE(all_cases().size(), 100u); }

}  // namespace
}  // namespace rl
