// The pieces of file reading that file_range.cpp and safetensors_file.cpp share.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "umem/weights/file_range.hpp"

namespace umem::weights::detail {

std::string errno_text(int err);

class file_descriptor {
 public:
  file_descriptor(const std::string& path, int flags);
  ~file_descriptor();
  file_descriptor(const file_descriptor&) = delete;
  file_descriptor& operator=(const file_descriptor&) = delete;
  file_descriptor(file_descriptor&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  file_descriptor& operator=(file_descriptor&&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

// Reads exactly `bytes` at `offset` unless the file ends first; the bytes read, or -errno.
long long read_at(int fd, void* to, std::size_t bytes, std::uint64_t offset);

// Opens `path` with O_DIRECT or throws invalid_argument saying the file system may not support it.
file_descriptor open_direct(const std::string& path, const std::string& what);

// Reads file bytes [from, from + bytes) into `to` with the threads and CPUs of `options` (its
// direct_io is the caller's business: `fd` is already opened as it needs); the first failure as
// text, empty on success.
std::string parallel_read(int fd, std::byte* to, std::uint64_t from, std::uint64_t bytes,
                          const read_options& options);

}  // namespace umem::weights::detail
