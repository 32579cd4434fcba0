// Typed reads of config.json fields with errors that name the key (shared by the architecture parsers).
// A missing or null key leaves *out unchanged (an error only when `required`).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/json.h"
#include "core/status.h"

namespace rl {

Status get_int(const Json& j, const char* key, int64_t* out, bool required, const std::string& what);
Status get_double(const Json& j, const char* key, double* out, const std::string& what);
Status get_bool(const Json& j, const char* key, bool* out, const std::string& what);
Status get_string(const Json& j, const char* key, std::string* out, const std::string& what);
// An integer or a list of integers (eos_token_id).
Status get_id_list(const Json& j, const char* key, std::vector<int64_t>* out, const std::string& what);
// A list of integers, each in [lo, hi]; at most `max_len` entries.
Status get_int_list(const Json& j, const char* key, std::vector<int64_t>* out, int64_t lo, int64_t hi, size_t max_len,
                    const std::string& what);
// v in [lo, hi], else an error naming the key and the value.
Status check_range(int64_t v, int64_t lo, int64_t hi, const char* key, const std::string& what);

}  // namespace rl
