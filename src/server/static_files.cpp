// The playground's static files. Paths are percent-decoded and confined to web_dir (no "..", no hidden files, no
// NUL or backslash); a single byte Range is honoured (206), an unsatisfiable one is a 416 with
// "Content-Range: bytes */size" and an error body; any other Range form is ignored (RFC 9110 lets a server send
// the whole file).
#include <cstdint>

#include "core/file.h"
#include "server/server_state.h"

namespace rl::server {
namespace {

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// The decoded path, or "" when it is not a safe relative file name.
std::string safe_relative_path(const std::string& path) {
  std::string out;
  for (size_t i = 0; i < path.size(); ++i) {
    char c = path[i];
    if (c == '%') {
      if (i + 2 >= path.size()) return "";
      const int hi = hex_value(path[i + 1]);
      const int lo = hex_value(path[i + 2]);
      if (hi < 0 || lo < 0) return "";
      c = static_cast<char>(hi * 16 + lo);
      i += 2;
    }
    if (c == '\0' || c == '\\') return "";
    out += c;
  }
  if (out.empty() || out[0] != '/') return "";
  if (out.back() == '/') out += "index.html";
  // Each segment must be a plain name: not empty, not hidden (which also rules out "." and "..").
  size_t start = 1;
  while (start <= out.size()) {
    const size_t end = std::min(out.find('/', start), out.size());
    if (end == start || out[start] == '.') return "";
    start = end + 1;
  }
  return out.substr(1);
}

const char* content_type_of(const std::string& name) {
  const size_t dot = name.find_last_of('.');
  const std::string ext = dot == std::string::npos ? "" : name.substr(dot + 1);
  if (ext == "html") return "text/html; charset=utf-8";
  if (ext == "js" || ext == "mjs") return "text/javascript; charset=utf-8";
  if (ext == "css") return "text/css; charset=utf-8";
  if (ext == "json") return "application/json";
  if (ext == "svg") return "image/svg+xml";
  if (ext == "png") return "image/png";
  if (ext == "ico") return "image/x-icon";
  return "application/octet-stream";
}

// "bytes=a-b", "bytes=a-", "bytes=-n" → [first, last]; false for any other form (ignored).
bool parse_range(const std::string& h, uint64_t size, uint64_t* first, uint64_t* last, bool* satisfiable) {
  if (h.rfind("bytes=", 0) != 0 || h.find(',') != std::string::npos) return false;
  const std::string spec = h.substr(6);
  const size_t dash = spec.find('-');
  if (dash == std::string::npos) return false;
  auto number = [](const std::string& s, uint64_t* v) {
    if (s.empty() || s.size() > 18) return false;
    *v = 0;
    for (char c : s) {
      if (c < '0' || c > '9') return false;
      *v = *v * 10 + static_cast<uint64_t>(c - '0');
    }
    return true;
  };
  uint64_t a = 0, b = 0;
  const std::string sa = spec.substr(0, dash), sb = spec.substr(dash + 1);
  if (sa.empty()) {  // suffix: the last b bytes
    if (!number(sb, &b)) return false;
    *satisfiable = b > 0 && size > 0;
    *first = b >= size ? 0 : size - b;
    *last = size == 0 ? 0 : size - 1;
    return true;
  }
  if (!number(sa, &a)) return false;
  if (!sb.empty() && (!number(sb, &b) || b < a)) return false;
  *satisfiable = a < size;
  *first = a;
  *last = sb.empty() || b >= size ? (size == 0 ? 0 : size - 1) : b;
  return true;
}

}  // namespace

bool serve_static(const std::string& web_dir, const HttpRequest& req, HttpResponder& res) {
  const std::string rel = safe_relative_path(req.path);
  if (rel.empty()) return false;
  const std::string file = path_join(web_dir, rel);
  if (!file_exists(file)) return false;
  Result<std::string> data = read_file(file);
  if (!data) return false;  // e.g. a directory
  const uint64_t size = data->size();
  const std::string range = req.header("Range");
  uint64_t first = 0, last = 0;
  bool satisfiable = false;
  if (!range.empty() && parse_range(range, size, &first, &last, &satisfiable)) {
    if (!satisfiable) {
      const ApiError e{416, "Range '" + range.substr(0, 64) + "' is outside the file's " + std::to_string(size) +
                                " bytes", "invalid_request_error", "", "range_not_satisfiable"};
      res.send(416, "application/json", e.body(), {{"Content-Range", "bytes */" + std::to_string(size)}});
      return true;
    }
    res.send(206, content_type_of(rel), data->substr(first, last - first + 1),
             {{"Content-Range", "bytes " + std::to_string(first) + "-" + std::to_string(last) + "/" +
                                    std::to_string(size)},
              {"Accept-Ranges", "bytes"}});
    return true;
  }
  res.send(200, content_type_of(rel), std::move(*data), {{"Accept-Ranges", "bytes"}});
  return true;
}

}  // namespace rl::server
