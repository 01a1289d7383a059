// One error type for all of umem. Foreign failures (HSA status, errno, hwloc's -1, parse errors)
// are translated into it at the boundary where they happen, with the context a user needs.
#pragma once

#include <stdexcept>
#include <string>

namespace umem {

enum class errc {
  invalid_argument,     // caller passed something unusable
  parse_error,          // an input file/text is malformed (message names file and line)
  io_error,             // a file could not be read or written
  not_found,            // a named thing (file, node, agent) does not exist
  runtime_unavailable,  // the GPU runtime or driver is absent
  runtime_error,        // the GPU runtime returned an error status
  unsupported,          // the loaded runtime or kernel lacks a feature
  out_of_memory,
  internal,
};

const char* to_string(errc);

class error : public std::runtime_error {
 public:
  error(errc code, const std::string& message) : std::runtime_error(message), code_(code) {}
  errc code() const noexcept { return code_; }

 private:
  errc code_;
};

[[noreturn]] void throw_error(errc code, const std::string& message);

// "message: strerror(err)" for errno-style failures.
[[noreturn]] void throw_errno(errc code, const std::string& message, int err);

}  // namespace umem
