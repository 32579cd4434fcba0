// Fuzz target: the server's HTTP/1.1 request path on raw bytes (server/http_message: RequestParser framing, chunked
// decoding, Content-Encoding decompression under the body cap), fed whole and in pieces of a size the input chooses,
// pipelined requests one after another. Invariants: the parser never consumes more than it is given, a request's body
// never exceeds the limit, and both feeding patterns see the same requests.
// fuzz-libs: rl_server
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "server/http_message.h"

namespace {

constexpr size_t kMaxBody = 1 << 16;

// Every request (method, path, body) and the first error status, feeding the bytes in pieces of `step`.
std::vector<std::string> run(std::string_view bytes, size_t step) {
  rl::server::HttpLimits limits;
  limits.max_header_bytes = 4096;
  limits.max_body_bytes = kMaxBody;
  rl::server::RequestParser p(limits);
  std::vector<std::string> seen;
  std::string buffered;
  size_t pos = 0;
  for (;;) {
    if (p.done()) {
      rl::server::HttpRequest r = p.take();
      if (r.body.size() > kMaxBody) std::abort();
      seen.push_back(r.method + " " + r.path + " " + std::to_string(r.body.size()) + (r.keep_alive ? "k" : "c"));
      if (!r.keep_alive) return seen;
      p.reset();
      continue;
    }
    if (p.error()) {
      if (p.error()->status < 400 || p.error()->status > 499) std::abort();
      seen.push_back("error " + std::to_string(p.error()->status));
      return seen;
    }
    if (!buffered.empty()) {
      const size_t used = p.feed(buffered);
      if (used > buffered.size()) std::abort();
      buffered.erase(0, used);
      if (used > 0 || p.done() || p.error()) continue;
    }
    if (pos >= bytes.size()) {
      p.feed_eof();
      if (p.error()) seen.push_back("error " + std::to_string(p.error()->status));
      return seen;
    }
    const size_t n = std::min(step, bytes.size() - pos);
    buffered.append(bytes.substr(pos, n));
    pos += n;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const size_t step = 1 + data[0] % 64;
  const std::string_view bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  const std::vector<std::string> whole = run(bytes, bytes.size() + 1);
  const std::vector<std::string> pieces = run(bytes, step);
  if (whole != pieces) std::abort();
  return 0;
}
