#include "json_validator.h"

#include <cmath>
#include <regex>

namespace rl::grammar_test {

namespace {

size_t code_points(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

// UTF-8 → UTF-32 in a wstring (wchar_t is 32 bits on Linux), so that std::wregex counts code points.
std::wstring wide(const std::string& s) {
  std::wstring out;
  for (size_t i = 0; i < s.size();) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    int n = c < 0x80 ? 1 : c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : 2;
    uint32_t cp = n == 1 ? c : c & (0x7F >> n);
    for (int k = 1; k < n && i + k < s.size(); ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
    out.push_back(static_cast<wchar_t>(cp));
    i += n;
  }
  return out;
}

bool all_hex(const std::string& s) {
  return !s.empty() && s.find_first_not_of("0123456789abcdefABCDEF") == std::string::npos;
}

bool valid_date(const std::string& s) {
  if (!std::regex_match(s, std::regex("\\d{4}-\\d{2}-\\d{2}"))) return false;
  int y = std::stoi(s.substr(0, 4)), m = std::stoi(s.substr(5, 2)), d = std::stoi(s.substr(8, 2));
  static const int kDays[] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  (void)y;  // 02-29 of a non-leap year is accepted (day-of-month bound only)
  return m >= 1 && m <= 12 && d >= 1 && d <= kDays[m - 1];
}
bool valid_time(const std::string& s) {
  std::smatch mt;
  if (!std::regex_match(s, mt, std::regex("(\\d{2}):(\\d{2}):(\\d{2})(\\.\\d+)?(Z|[+-](\\d{2}):(\\d{2}))"))) return false;
  if (std::stoi(mt[1]) > 23 || std::stoi(mt[2]) > 59 || std::stoi(mt[3]) > 60) return false;
  if (mt[6].matched && (std::stoi(mt[6]) > 23 || std::stoi(mt[7]) > 59)) return false;
  return true;
}
bool valid_label(const std::string& l) {
  return !l.empty() && l.size() <= 63 && std::regex_match(l, std::regex("[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?"));
}
bool valid_hostname(const std::string& s) {
  if (s.empty() || s.size() > 253) return false;
  size_t start = 0;
  while (true) {
    size_t dot = s.find('.', start);
    if (!valid_label(s.substr(start, dot == std::string::npos ? std::string::npos : dot - start))) return false;
    if (dot == std::string::npos) return true;
    start = dot + 1;
  }
}
bool valid_format(const std::string& f, const std::string& s) {
  if (f == "date") return valid_date(s);
  if (f == "time") return valid_time(s);
  if (f == "date-time") {
    size_t t = s.find('T');
    return t != std::string::npos && valid_date(s.substr(0, t)) && valid_time(s.substr(t + 1));
  }
  if (f == "uuid")
    return s.size() == 36 && s[8] == '-' && s[13] == '-' && s[18] == '-' && s[23] == '-' &&
           all_hex(s.substr(0, 8) + s.substr(9, 4) + s.substr(14, 4) + s.substr(19, 4) + s.substr(24));
  if (f == "email") {
    size_t at = s.find('@');
    if (at == std::string::npos || at == 0 || s.find('@', at + 1) != std::string::npos) return false;
    const std::string local = s.substr(0, at);
    if (local.front() == '.' || local.back() == '.' || local.find("..") != std::string::npos) return false;
    if (!std::regex_match(local, std::regex("[A-Za-z0-9!#$%&'*+/=?^_`{|}~.-]+"))) return false;
    return valid_hostname(s.substr(at + 1)) && s.find('.', at) != std::string::npos;
  }
  if (f == "ipv4") {
    std::smatch m;
    if (!std::regex_match(s, m, std::regex("(\\d{1,3})\\.(\\d{1,3})\\.(\\d{1,3})\\.(\\d{1,3})"))) return false;
    for (int i = 1; i <= 4; ++i) {
      const std::string p = m[i];
      if ((p.size() > 1 && p[0] == '0') || std::stoi(p) > 255) return false;
    }
    return true;
  }
  if (f == "ipv6") {
    // The full (uncompressed) form, and "::" compression.
    int groups = 0;
    bool compressed = s.find("::") != std::string::npos;
    if (compressed && s.find("::", s.find("::") + 1) != std::string::npos) return false;
    size_t start = 0;
    while (start <= s.size()) {
      size_t c = s.find(':', start);
      std::string g = s.substr(start, c == std::string::npos ? std::string::npos : c - start);
      if (!g.empty()) {
        if (g.size() > 4 || !all_hex(g)) return false;
        ++groups;
      }
      if (c == std::string::npos) break;
      start = c + 1;
    }
    return compressed ? groups < 8 : groups == 8;
  }
  if (f == "hostname") return valid_hostname(s);
  if (f == "uri") return std::regex_match(s, std::regex("[A-Za-z][A-Za-z0-9+.-]*:[^\\s\"<>\\\\^`{|}]*"));
  return false;
}

class Validator {
 public:
  explicit Validator(const OrderedJson& root) : root_(root) {}

  const OrderedJson* resolve(const std::string& ref) const {
    const OrderedJson* cur = &root_;
    if (ref == "#") return cur;
    if (ref.rfind("#/", 0) != 0) return nullptr;
    size_t pos = 2;
    while (true) {
      size_t next = ref.find('/', pos);
      std::string part = ref.substr(pos, next == std::string::npos ? std::string::npos : next - pos);
      std::string un;
      for (size_t i = 0; i < part.size(); ++i) {
        if (part[i] == '~' && i + 1 < part.size()) {
          un.push_back(part[i + 1] == '1' ? '/' : '~');
          ++i;
        } else {
          un.push_back(part[i]);
        }
      }
      part = un;
      if (!cur->is_object() || !cur->contains(part)) return nullptr;
      cur = &(*cur)[part];
      if (next == std::string::npos) return cur;
      pos = next + 1;
    }
  }

  static bool type_is(const OrderedJson& x, const std::string& t) {
    if (t == "object") return x.is_object();
    if (t == "array") return x.is_array();
    if (t == "string") return x.is_string();
    if (t == "boolean") return x.is_boolean();
    if (t == "null") return x.is_null();
    if (t == "number") return x.is_number();
    if (t == "integer")
      return x.is_number_integer() || (x.is_number_float() && std::floor(x.get<double>()) == x.get<double>());
    return false;
  }

  std::string check(const OrderedJson& x, const OrderedJson& s, const std::string& path) const {
    if (s.is_boolean()) return s.get<bool>() ? "" : path + ": false schema";
    if (s.contains("$ref")) {
      const OrderedJson* t = resolve(s["$ref"].get<std::string>());
      if (!t) return path + ": unresolved $ref";
      if (std::string e = check(x, *t, path); !e.empty()) return e;
    }
    if (s.contains("type")) {
      bool ok = false;
      if (s["type"].is_string()) ok = type_is(x, s["type"].get<std::string>());
      else
        for (const auto& t : s["type"]) ok = ok || type_is(x, t.get<std::string>());
      if (!ok) return path + ": type is not " + s["type"].dump();
    }
    if (s.contains("const") && !(x == s["const"])) return path + ": not the const";
    if (s.contains("enum")) {
      bool ok = false;
      for (const auto& v : s["enum"]) ok = ok || v == x;
      if (!ok) return path + ": not in enum";
    }
    if (s.contains("anyOf")) {
      bool ok = false;
      for (const auto& sub : s["anyOf"]) ok = ok || check(x, sub, path).empty();
      if (!ok) return path + ": matches no anyOf branch";
    }
    if (s.contains("oneOf")) {
      int n = 0;
      for (const auto& sub : s["oneOf"]) n += check(x, sub, path).empty();
      if (n != 1) return path + ": matches " + std::to_string(n) + " oneOf branches";
    }
    if (s.contains("allOf"))
      for (const auto& sub : s["allOf"])
        if (std::string e = check(x, sub, path); !e.empty()) return e;
    if (x.is_number()) {
      const double v = x.get<double>();
      if (s.contains("minimum") && v < s["minimum"].get<double>()) return path + ": below minimum";
      if (s.contains("maximum") && v > s["maximum"].get<double>()) return path + ": above maximum";
      if (s.contains("exclusiveMinimum") && v <= s["exclusiveMinimum"].get<double>()) return path + ": not above exclusiveMinimum";
      if (s.contains("exclusiveMaximum") && v >= s["exclusiveMaximum"].get<double>()) return path + ": not below exclusiveMaximum";
    }
    if (x.is_string()) {
      const std::string v = x.get<std::string>();
      const size_t n = code_points(v);
      if (s.contains("minLength") && n < s["minLength"].get<size_t>()) return path + ": shorter than minLength";
      if (s.contains("maxLength") && n > s["maxLength"].get<size_t>()) return path + ": longer than maxLength";
      if (s.contains("pattern") && !std::regex_search(wide(v), std::wregex(wide(s["pattern"].get<std::string>()), std::regex::ECMAScript)))
        return path + ": does not match pattern " + s["pattern"].get<std::string>() + ": " + OrderedJson(v).dump();
      if (s.contains("format") && !valid_format(s["format"].get<std::string>(), v))
        return path + ": not a valid " + s["format"].get<std::string>() + ": " + OrderedJson(v).dump();
    }
    if (x.is_array()) {
      const size_t n = x.size();
      if (s.contains("minItems") && n < s["minItems"].get<size_t>()) return path + ": fewer than minItems";
      if (s.contains("maxItems") && n > s["maxItems"].get<size_t>()) return path + ": more than maxItems";
      size_t first = 0;
      if (s.contains("prefixItems")) {
        for (; first < s["prefixItems"].size() && first < n; ++first)
          if (std::string e = check(x[first], s["prefixItems"][first], path + "/" + std::to_string(first)); !e.empty()) return e;
      }
      if (s.contains("items"))
        for (size_t i = first; i < n; ++i)
          if (std::string e = check(x[i], s["items"], path + "/" + std::to_string(i)); !e.empty()) return e;
    }
    if (x.is_object()) {
      if (s.contains("required"))
        for (const auto& r : s["required"])
          if (!x.contains(r.get<std::string>())) return path + ": missing required " + r.dump();
      for (const auto& [k, v] : x.items()) {
        const bool known = s.contains("properties") && s["properties"].contains(k);
        if (known) {
          if (std::string e = check(v, s["properties"][k], path + "/" + k); !e.empty()) return e;
        } else if (s.contains("additionalProperties")) {
          if (std::string e = check(v, s["additionalProperties"], path + "/" + k); !e.empty()) return e;
        }
      }
    }
    return "";
  }

 private:
  const OrderedJson& root_;
};

}  // namespace

std::string validate(const OrderedJson& instance, const OrderedJson& schema) {
  return Validator(schema).check(instance, schema, "#");
}

}  // namespace rl::grammar_test
