// File helpers: whole-file reads and read-only memory maps, with errors as Status.
#pragma once

#include <cstddef>
#include <string>

#include "core/status.h"

namespace rl {

Result<std::string> read_file(const std::string& path);
Status write_file(const std::string& path, const std::string& data);
bool file_exists(const std::string& path);
bool is_directory(const std::string& path);
std::string path_join(const std::string& a, const std::string& b);

// A read-only private mapping of a whole file; unmapped on destruction. An empty file maps to (nullptr, 0).
class MappedFile {
 public:
  static Result<MappedFile> open(const std::string& path);
  MappedFile() = default;
  MappedFile(MappedFile&& o) noexcept;
  MappedFile& operator=(MappedFile&& o) noexcept;
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const unsigned char* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  const unsigned char* data_ = nullptr;
  size_t size_ = 0;
  std::string path_;
};

}  // namespace rl
