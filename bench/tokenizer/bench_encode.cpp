// Encode throughput of ridgeline's tokenizer on one core: encodes every line of a corpus file (line
// + "\n", without special tokens) and prints "<MB/s> <num_ids> <cpu seconds>". Time is the
// process's CPU time (the build machine is shared, so wall time mostly measures the neighbours).
// Built and run by bench/tokenizer/run.sh. Usage: bench_encode <model_dir> <corpus.txt>
#include <cstdio>
#include <ctime>
#include <string>
#include <string_view>
#include <vector>

#include "core/file.h"
#include "tokenizer/tokenizer.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: bench_encode <model_dir> <corpus.txt>\n");
    return 2;
  }
  auto tok = rl::Tokenizer::load(argv[1]);
  if (!tok) {
    std::fprintf(stderr, "bench_encode: %s\n", tok.message().c_str());
    return 1;
  }
  auto text = rl::read_file(argv[2]);
  if (!text) {
    std::fprintf(stderr, "bench_encode: %s\n", text.message().c_str());
    return 1;
  }
  std::vector<std::string> lines;
  std::string_view all = *text;
  for (size_t pos = 0; pos < all.size();) {
    size_t end = all.find('\n', pos);
    end = end == std::string_view::npos ? all.size() : end + 1;
    lines.emplace_back(all.substr(pos, end - pos));
    pos = end;
  }
  size_t num_ids = 0;
  std::clock_t t0 = std::clock();
  for (const std::string& line : lines) num_ids += (*tok)->encode(line, false).size();
  double seconds = static_cast<double>(std::clock() - t0) / CLOCKS_PER_SEC;
  std::printf("%.2f %zu %.3f\n", static_cast<double>(all.size()) / 1e6 / seconds, num_ids, seconds);
  return 0;
}
