#include "umem/core/error.hpp"

#include <cstring>

namespace umem {

const char* to_string(errc code) {
  switch (code) {
    case errc::invalid_argument: return "invalid argument";
    case errc::parse_error: return "parse error";
    case errc::io_error: return "I/O error";
    case errc::not_found: return "not found";
    case errc::runtime_unavailable: return "GPU runtime unavailable";
    case errc::runtime_error: return "GPU runtime error";
    case errc::unsupported: return "unsupported";
    case errc::out_of_memory: return "out of memory";
    case errc::internal: return "internal error";
  }
  return "unknown error";
}

void throw_error(errc code, const std::string& message) { throw error(code, message); }

void throw_errno(errc code, const std::string& message, int err) {
  throw error(code, message + ": " + std::strerror(err));
}

}  // namespace umem
