#include "loader/config_fields.h"

#include <cmath>
#include <cstdio>
#include <vector>

namespace rl {

namespace {

std::string quoted(const char* key) { return std::string("\"") + key + "\""; }

// A short rendering of the offending value: a hostile config may hold megabytes in one field.
std::string shown(const Json& v) {
  if (v.is_structured()) {  // dump() would recurse as deep as the value: only flat, short ones are shown
    bool flat = v.size() <= 16;
    for (const Json& e : v) flat = flat && !e.is_structured();
    if (!flat) return v.is_array() ? "an array" : "an object";
  }
  std::string s = v.dump(-1, ' ', false, Json::error_handler_t::replace);
  if (s.size() > 64) s = s.substr(0, 61) + "...";
  return s;
}

// "[lo, hi]" (built with snprintf: GCC 12 warns falsely on "[" + std::to_string(...)).
std::string int_range(int64_t lo, int64_t hi) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "[%lld, %lld]", static_cast<long long>(lo), static_cast<long long>(hi));
  return buf;
}

std::string fmt_double(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.6g", v);
  return buf;
}

// The value at `key`, or null when it is absent or JSON null (or j is not an object).
const Json* lookup(const Json& j, const char* key) {
  if (!j.is_object()) return nullptr;
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return nullptr;
  return &*it;
}

Status missing(const char* key, const std::string& what) {
  return Status::error(what + ": missing required key " + quoted(key));
}

}  // namespace

Status require_int_range(int64_t value, const char* key, int64_t lo, int64_t hi, const std::string& what) {
  if (value < lo || value > hi) {
    return Status::error(what + ": " + quoted(key) + " must be an integer in " + int_range(lo, hi) + ", got " +
                         std::to_string(value));
  }
  return Status::ok();
}

Status read_int_in_range(const Json& j, const char* key, int64_t lo, int64_t hi, int64_t* out,
                         const std::string& what, Presence presence) {
  const Json* v = lookup(j, key);
  if (v == nullptr) return presence == Presence::kRequired ? missing(key, what) : Status::ok();
  const std::string range = int_range(lo, hi);
  int64_t value = 0;
  if (v->is_number_unsigned()) {
    const uint64_t u = v->get<uint64_t>();
    if (u > static_cast<uint64_t>(hi)) {
      return Status::error(what + ": " + quoted(key) + " must be an integer in " + range + ", got " + shown(*v));
    }
    value = static_cast<int64_t>(u);
  } else if (v->is_number_integer()) {
    value = v->get<int64_t>();
  } else if (v->is_number_float() && std::isfinite(v->get<double>()) &&
             std::floor(v->get<double>()) == v->get<double>() && std::abs(v->get<double>()) < 9e15) {
    value = static_cast<int64_t>(v->get<double>());
  } else {
    return Status::error(what + ": " + quoted(key) + " must be an integer in " + range + ", got " + shown(*v));
  }
  RL_RETURN_IF_ERROR(require_int_range(value, key, lo, hi, what));
  *out = value;
  return Status::ok();
}

Status read_double_in_range(const Json& j, const char* key, double lo, double hi, double* out,
                            const std::string& what, Presence presence) {
  const Json* v = lookup(j, key);
  if (v == nullptr) return presence == Presence::kRequired ? missing(key, what) : Status::ok();
  const double d = v->is_number() ? v->get<double>() : std::nan("");
  if (!(d >= lo && d <= hi)) {  // also false for NaN and for non-numbers
    return Status::error(what + ": " + quoted(key) + " must be a number in [" + fmt_double(lo) + ", " +
                         fmt_double(hi) + "], got " + shown(*v));
  }
  *out = d;
  return Status::ok();
}

Status read_positive_double(const Json& j, const char* key, double hi, double* out, const std::string& what,
                            Presence presence) {
  const Json* v = lookup(j, key);
  if (v == nullptr) return presence == Presence::kRequired ? missing(key, what) : Status::ok();
  const double d = v->is_number() ? v->get<double>() : std::nan("");
  if (!(d > 0 && d <= hi)) {
    return Status::error(what + ": " + quoted(key) + " must be a number in (0, " + fmt_double(hi) + "], got " +
                         shown(*v));
  }
  *out = d;
  return Status::ok();
}

Status read_bool(const Json& j, const char* key, bool* out, const std::string& what) {
  const Json* v = lookup(j, key);
  if (v == nullptr) return Status::ok();
  if (!v->is_boolean()) return Status::error(what + ": " + quoted(key) + " must be a boolean, got " + shown(*v));
  *out = v->get<bool>();
  return Status::ok();
}

Status read_string(const Json& j, const char* key, std::string* out, const std::string& what) {
  const Json* v = lookup(j, key);
  if (v == nullptr) return Status::ok();
  if (!v->is_string()) return Status::error(what + ": " + quoted(key) + " must be a string, got " + shown(*v));
  *out = v->get<std::string>();
  return Status::ok();
}

Status read_object(const Json& j, const char* key, const Json** out, const std::string& what) {
  const Json* v = lookup(j, key);
  *out = nullptr;
  if (v == nullptr) return Status::ok();
  if (!v->is_object()) {
    return Status::error(what + ": " + quoted(key) + " must be an object or null, got " + shown(*v));
  }
  *out = v;
  return Status::ok();
}

Status read_id_list(const Json& j, const char* key, int64_t hi, std::vector<int64_t>* out,
                    const std::string& what) {
  const Json* v = lookup(j, key);
  if (v == nullptr) return Status::ok();
  const std::string range = int_range(0, hi);
  const auto bad = [&]() {
    return Status::error(what + ": " + quoted(key) + " must be a token id in " + range +
                         " or a list of them, got " + shown(*v));
  };
  std::vector<int64_t> ids;
  const auto take = [&](const Json& e) {
    if (!e.is_number_integer() && !e.is_number_unsigned()) return false;
    if (e.is_number_unsigned() ? e.get<uint64_t>() > static_cast<uint64_t>(hi)
                               : (e.get<int64_t>() < 0 || e.get<int64_t>() > hi)) {
      return false;
    }
    ids.push_back(e.get<int64_t>());
    return true;
  };
  if (v->is_array()) {
    for (const Json& e : *v) {
      if (!take(e)) return bad();
    }
  } else if (!take(*v)) {
    return bad();
  }
  *out = std::move(ids);
  return Status::ok();
}

Status read_int_list(const Json& j, const char* key, int64_t lo, int64_t hi, size_t max_len,
                     std::vector<int64_t>* out, const std::string& what) {
  const Json* v = lookup(j, key);
  if (v == nullptr) return Status::ok();
  const auto bad = [&]() {
    return Status::error(what + ": " + quoted(key) + " must be a list of at most " + std::to_string(max_len) +
                         " integers in " + int_range(lo, hi) + ", got " + shown(*v));
  };
  if (!v->is_array() || v->size() > max_len) return bad();
  std::vector<int64_t> vals;
  for (const Json& e : *v) {
    if (!e.is_number_integer() || e.get<int64_t>() < lo || e.get<int64_t>() > hi) return bad();
    vals.push_back(e.get<int64_t>());
  }
  *out = std::move(vals);
  return Status::ok();
}

}  // namespace rl
