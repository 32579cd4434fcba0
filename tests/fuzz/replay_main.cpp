// Runs a fuzz target's LLVMFuzzerTestOneInput over files and folders given on the command line (its corpus),
// without libFuzzer: the fuzz targets double as regression tests in every preset (tests/fuzz/tests.cmake).
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

int run_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "replay: cannot read %s\n", p.c_str());
    return 1;
  }
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  int failures = 0, num_inputs = 0;
  for (int i = 1; i < argc; ++i) {
    std::filesystem::path arg(argv[i]);
    if (std::filesystem::is_directory(arg)) {
      std::vector<std::filesystem::path> files;
      for (const auto& e : std::filesystem::recursive_directory_iterator(arg)) {
        if (e.is_regular_file()) files.push_back(e.path());
      }
      std::sort(files.begin(), files.end());
      for (const auto& f : files) {
        failures += run_file(f);
        ++num_inputs;
      }
    } else {
      failures += run_file(arg);
      ++num_inputs;
    }
  }
  std::printf("replayed %d inputs\n", num_inputs);
  if (num_inputs == 0) {
    std::fprintf(stderr, "replay: no inputs (an empty corpus?)\n");
    return 1;
  }
  return failures == 0 ? 0 : 1;
}
