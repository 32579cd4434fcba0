// Fuzz target: a safetensors file (8-byte header length, JSON header, data region) through SafetensorsFile::open,
// which validates it completely (dtype, shape, spans inside the data region, no overlap, no duplicate names).
// fuzz-libs: rl_loader
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>

#include "loader/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // open() maps a file: write the input to this process's scratch file.
  static const std::string path = "/tmp/rl_fuzz_safetensors." + std::to_string(getpid());
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return 0;
  if (size > 0) std::fwrite(data, 1, size, f);
  std::fclose(f);
  auto r = rl::SafetensorsFile::open(path);
  if (r.is_ok()) {
    // Every accepted tensor lies inside the data region: touch its first and last byte.
    unsigned sum = 0;
    for (const auto& [name, t] : (*r)->tensors()) {
      if (t.nbytes > 0) sum += t.data[0] + t.data[t.nbytes - 1];
    }
    if (sum == 0xffffffffu) std::abort();  // keeps the reads alive
  }
  return 0;
}
