// libFuzzer target: the safetensors header parser (after its first 8 bytes: the data section's
// length, little-endian, in the low 63 bits) and the sharded checkpoint's index parser (when the
// top bit of those 8 bytes is set) return or throw
// umem::error; anything else (another exception, a crash, a sanitizer report) is a finding, as is
// a header accepted whose tensors do not cover the data section exactly.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "umem/core/error.hpp"
#include "umem/weights/checkpoint.hpp"
#include "umem/weights/safetensors_header.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 8) return 0;
  std::uint64_t data_bytes = 0;
  for (int i = 7; i >= 0; --i) data_bytes = data_bytes << 8 | data[i];
  const bool index = (data_bytes >> 63) != 0;
  data_bytes &= ~(std::uint64_t{1} << 63);
  const std::string_view text(reinterpret_cast<const char*>(data) + 8, size - 8);
  try {
    if (index) {
      (void)umem::weights::parse_checkpoint_index(text, "/nonexistent/model.safetensors.index.json");
    } else {
      const auto h = umem::weights::parse_safetensors_header(text, data_bytes, "fuzz");
      std::uint64_t at = 0;
      for (const auto& t : h.tensors) {
        if (t.begin != at || t.end < t.begin) std::abort();
        at = t.end;
      }
      if (at != data_bytes) std::abort();
    }
  } catch (const umem::error&) {
  }
  return 0;
}
