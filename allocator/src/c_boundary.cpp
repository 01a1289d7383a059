#include "umem/allocator/c_boundary.hpp"

#include <cstdlib>
#include <cstring>
#include <new>

namespace umem::alloc {

umem_status fail(c_failure_source last, umem_status status, std::string message) {
  c_failure& record = last.record();
  record.message = std::move(message);
  record.status = status;
  return status;
}

char* dup_string(const std::string& s) {
  char* out = static_cast<char*>(std::malloc(s.size() + 1));
  if (out == nullptr) throw std::bad_alloc();
  std::memcpy(out, s.c_str(), s.size() + 1);
  return out;
}

}  // namespace umem::alloc
