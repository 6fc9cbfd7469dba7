// io: read-only memory mapping of a file. Mapping is lazy: no tensor byte is read until touched.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>

#include "core/status.h"

namespace dsv4 {

class MappedFile {
 public:
  static Result<std::unique_ptr<MappedFile>> open(const std::filesystem::path& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  std::span<const std::byte> bytes() const { return {data_, size_}; }
  uint64_t size() const { return size_; }
  const std::filesystem::path& path() const { return path_; }

 private:
  MappedFile() = default;
  std::filesystem::path path_;
  const std::byte* data_ = nullptr;
  uint64_t size_ = 0;
};

}  // namespace dsv4
