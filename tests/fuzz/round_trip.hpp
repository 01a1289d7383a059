// Shared by the fuzz targets: a model that was accepted must survive a snapshot round trip.
#pragma once

#include <cstdio>
#include <cstdlib>

#include "umem/core/snapshot.hpp"

namespace umem::fuzz {

// Aborts (a libFuzzer finding) if load(save(t)) != t. Any exception escaping is a finding too.
inline void check_snapshot_round_trip(const topology& t) {
  if (snapshot_from_json(snapshot_to_json(t), "round-trip") != t) {
    std::fputs("snapshot round trip changed the model\n", stderr);
    std::abort();
  }
}

}  // namespace umem::fuzz
