// Range-checked reads of config.json fields. Every numeric field a model reads from an untrusted config goes
// through one of these, so a nonsense value (head_dim 0, a negative context length, a string where an object
// belongs) becomes an error that names the key, the accepted range and the value found, e.g.
//   config.json: "head_dim" must be an integer in [1, 1024], got 0
// Missing or null keys leave *out untouched unless the read is required. Reused by per-architecture parsers.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/json.h"
#include "core/status.h"

namespace rl {

// Ranges accepted from config.json: wide enough for every released model, small enough that products such as
// vocab_size * hidden_size and num_hidden_layers * kv_bytes_per_token cannot overflow int64.
namespace config_limits {
constexpr int64_t kMaxVocab = int64_t{1} << 24;
constexpr int64_t kMaxHidden = int64_t{1} << 17;
constexpr int64_t kMaxIntermediate = int64_t{1} << 20;
constexpr int64_t kMaxLayers = 1024;
constexpr int64_t kMaxHeads = 1024;
constexpr int64_t kMaxHeadDim = 1024;
constexpr int64_t kMaxPositions = int64_t{1} << 24;
constexpr int64_t kMaxTokenId = (int64_t{1} << 31) - 1;
constexpr int64_t kMaxExperts = 4096;
}  // namespace config_limits

enum class Presence { kOptional, kRequired };

// Integer `key` of object j (an integral float such as 4096.0 is accepted) into *out, lo <= value <= hi.
Status read_int_in_range(const Json& j, const char* key, int64_t lo, int64_t hi, int64_t* out,
                         const std::string& what, Presence presence = Presence::kOptional);
// Finite number `key` into *out, lo <= value <= hi (NaN and infinities are rejected).
Status read_double_in_range(const Json& j, const char* key, double lo, double hi, double* out,
                            const std::string& what, Presence presence = Presence::kOptional);
// Same, with an exclusive lower bound: lo < value <= hi (epsilons, rope_theta, scaling factors).
Status read_positive_double(const Json& j, const char* key, double hi, double* out, const std::string& what,
                            Presence presence = Presence::kOptional);
Status read_bool(const Json& j, const char* key, bool* out, const std::string& what);
// A string field; any other JSON type is an error.
Status read_string(const Json& j, const char* key, std::string* out, const std::string& what);
// An object field: *out points at it, or stays null when the key is absent or null; any other type is an error.
Status read_object(const Json& j, const char* key, const Json** out, const std::string& what);
// A token id or a list of them, each in [0, hi]. An absent or null key leaves *out untouched.
Status read_id_list(const Json& j, const char* key, int64_t hi, std::vector<int64_t>* out,
                    const std::string& what);
// A list of integers, each in [lo, hi], at most max_len of them (mlp_only_layers). Absent or null: untouched.
Status read_int_list(const Json& j, const char* key, int64_t lo, int64_t hi, size_t max_len,
                     std::vector<int64_t>* out, const std::string& what);

// A value computed from several fields (head_dim = hidden_size / num_attention_heads) checked the same way.
Status require_int_range(int64_t value, const char* key, int64_t lo, int64_t hi, const std::string& what);

}  // namespace rl
