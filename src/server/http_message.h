// HTTP/1.1 request framing (RFC 9112) on plain byte buffers, with no sockets: the server's connections and the
// fuzz target (tests/fuzz/fuzz_http_request.cpp) both push raw bytes through RequestParser. Boost.Beast's parser
// does the tokenizing and chunked decoding; the rules here are ours:
//   - one Content-Length (several with different values, or Content-Length with Transfer-Encoding: 400);
//   - Transfer-Encoding: only "chunked"; exactly one Host on HTTP/1.1; origin-form or absolute-form targets;
//   - header block ≤ max_header_bytes (431), body ≤ max_body_bytes (413), both before and after decoding a
//     Content-Encoding of gzip or deflate (415 for any other coding);
// Every failure is an HttpError with the status to answer; the connection is closed after it (the framing of
// what follows can no longer be trusted).
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace rl::server {

using HttpHeaders = std::vector<std::pair<std::string, std::string>>;

struct HttpRequest {
  std::string method;
  std::string target;  // as sent
  std::string path;    // target without the query (absolute-form reduced to its path)
  std::string query;   // after '?', undecoded
  int version = 11;    // 10 or 11
  HttpHeaders headers;
  std::string body;    // de-chunked and decompressed
  bool keep_alive = true;

  // The first field of that name (case-insensitive), or "".
  std::string header(std::string_view name) const;
};

struct HttpLimits {
  size_t max_header_bytes = 64u << 10;
  size_t max_body_bytes = 8u << 20;
};

struct HttpError {
  int status = 400;
  std::string message;
  std::string code;  // OpenAI-shape "code"
};

// One request at a time: feed() bytes until done() or error(); take() the request, then reset() for the next
// one (the bytes feed() did not consume belong to it: pipelining).
class RequestParser {
 public:
  explicit RequestParser(HttpLimits limits);
  ~RequestParser();
  RequestParser(const RequestParser&) = delete;
  RequestParser& operator=(const RequestParser&) = delete;

  // Consumes a prefix of data; returns how much. Call again with more bytes (the unconsumed rest first) while
  // neither done() nor error().
  size_t feed(std::string_view data);
  // The stream ended (the peer closed its side): a request in progress is an error; none started is not.
  void feed_eof();
  bool started() const { return started_; }
  bool header_done() const;
  // After header_done(): the client waits for "100 Continue" before sending the body.
  bool expects_continue() const;
  bool done() const { return request_.has_value(); }
  const std::optional<HttpError>& error() const { return error_; }
  HttpRequest take();
  void reset();

 private:
  struct Impl;
  std::optional<HttpError> finish();
  std::optional<HttpError> check_header();

  HttpLimits limits_;
  std::unique_ptr<Impl> impl_;
  bool started_ = false;
  bool header_checked_ = false;
  std::optional<HttpRequest> request_;
  std::optional<HttpError> error_;
};

// Decompresses a gzip or deflate (zlib or raw) body into at most limit bytes; 413 naming the limit above it,
// 400 for corrupt data, 415 for other codings.
std::optional<HttpError> decode_content(std::string_view coding, std::string_view in, size_t limit,
                                        std::string* out);

const char* http_reason(int status);
// "HTTP/1.1 <status> <reason>" and the headers; Content-Length when given, else chunked.
std::string response_head(int status, const HttpHeaders& headers, std::optional<size_t> content_length,
                          bool close);

}  // namespace rl::server
