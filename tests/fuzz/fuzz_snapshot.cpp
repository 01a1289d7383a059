// libFuzzer target: snapshot_from_json returns or throws umem::error; anything else (another
// exception, a crash, a sanitizer report, a model that changes when saved and loaded again) is
// a finding.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "round_trip.hpp"
#include "umem/core/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    umem::fuzz::check_snapshot_round_trip(umem::snapshot_from_json(text, "fuzz"));
  } catch (const umem::error&) {
  }
  return 0;
}
