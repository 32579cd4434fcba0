// The HTTP/1.1 request parser (server/http_message, on Boost.Beast) fed in every way a socket may split the bytes:
// the same requests whatever the split, including the final chunk of an empty chunked body cut after "0\r\n"
// (Beast 1.74 asserts on it when offered back with one more byte; found by the http_request fuzzer).
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "server/http_message.h"

namespace rl::server {
namespace {

// Requests (method path body-size) and the first error, feeding `bytes` in pieces of `step`.
std::vector<std::string> parse(const std::string& bytes, size_t step) {
  HttpLimits limits;
  RequestParser p(limits);
  std::vector<std::string> seen;
  std::string buffered;
  size_t pos = 0;
  for (;;) {
    if (p.done()) {
      HttpRequest r = p.take();
      seen.push_back(r.method + " " + r.path + " " + std::to_string(r.body.size()));
      p.reset();
      continue;
    }
    if (p.error()) {
      seen.push_back("error " + std::to_string(p.error()->status));
      return seen;
    }
    if (!buffered.empty()) {
      const size_t used = p.feed(buffered);
      buffered.erase(0, used);
      if (used > 0 || p.done() || p.error()) continue;
    }
    if (pos >= bytes.size()) {
      p.feed_eof();
      if (p.error()) seen.push_back("error " + std::to_string(p.error()->status));
      return seen;
    }
    buffered.append(bytes.substr(pos, step));
    pos += step;
  }
}

TEST(RequestParser, EveryByteSplitGivesTheSameRequests) {
  const std::string empty_chunked = "POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n";
  const std::string chunked = "POST /a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n";
  const std::string sized = "POST /b HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc";
  const std::string get = "GET /health HTTP/1.1\r\nHost: x\r\n\r\n";
  const std::string all = empty_chunked + chunked + sized + get + empty_chunked;
  const std::vector<std::string> want = {"POST /v1/completions 0", "POST /a 5", "POST /b 3", "GET /health 0",
                                         "POST /v1/completions 0"};
  for (size_t step = 1; step <= all.size(); ++step) EXPECT_EQ(parse(all, step), want) << "pieces of " << step;
}

TEST(RequestParser, TheFuzzersEmptyChunkedBodyThenGarbage) {
  // The fuzz input (tests/fuzz/corpus/http_request/regression-beast-final-chunk-split) without its first byte.
  const std::string bytes =
      "POST / HTTP/1.1\r\nHost: x\r\nConte-Encodinnt-Length: 4.\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
      ": 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n";
  const std::vector<std::string> whole = parse(bytes, bytes.size());
  ASSERT_GE(whole.size(), 2u);
  EXPECT_EQ(whole[0], "POST / 0");
  EXPECT_EQ(whole.back(), "error 400");
  for (size_t step = 1; step <= 16; ++step) EXPECT_EQ(parse(bytes, step), whole) << "pieces of " << step;
}

TEST(RequestParser, LastChunkWithTrailersInEveryPieceSize) {
  // The last chunk followed by trailer fields: Beast parses "0\r\n", finds no end of message yet, and re-parses
  // the last chunk on the next call, which asserts when it gets fewer than 5 bytes (the second fuzz finding).
  const std::string trailer = "POST /t HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                              "3\r\nabc\r\n0\r\nX-Checksum: 1\r\nX-B: 2\r\n\r\n";
  const std::string get = "GET /health HTTP/1.1\r\nHost: x\r\n\r\n";
  const std::string all = trailer + get + trailer;
  const std::vector<std::string> want = {"POST /t 3", "GET /health 0", "POST /t 3"};
  for (size_t step = 1; step <= all.size(); ++step) EXPECT_EQ(parse(all, step), want) << "pieces of " << step;
}

TEST(RequestParser, TheFuzzersLastChunkWithGarbageTrailer) {
  // tests/fuzz/corpus/http_request/regression-beast-final-chunk-trailer without its first byte (the harness's
  // piece size, 8): a last chunk whose "trailer" is a JSON fragment and a repeated header block.
  std::ifstream in(std::string(RIDGELINE_SOURCE_DIR) +
                       "/tests/fuzz/corpus/http_request/regression-beast-final-chunk-trailer",
                   std::ios::binary);
  ASSERT_TRUE(in.good());
  const std::string file((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_GT(file.size(), 1u);
  const std::string bytes = file.substr(1);
  const std::vector<std::string> whole = parse(bytes, bytes.size());
  ASSERT_FALSE(whole.empty());
  for (size_t step = 1; step <= 64; ++step) EXPECT_EQ(parse(bytes, step), whole) << "pieces of " << step;
}

}  // namespace
}  // namespace rl::server
