// libFuzzer target: import_rocminfo returns or throws umem::error; anything else (another
// exception, a crash, a sanitizer report, a model that does not survive a snapshot) is a finding.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "round_trip.hpp"
#include "umem/core/error.hpp"
#include "umem/importers/rocminfo_importer.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const auto imp = umem::importers::import_rocminfo(text, "fuzz");
    umem::fuzz::check_snapshot_round_trip(imp.topo);
  } catch (const umem::error&) {
  }
  return 0;
}
