// fuzz_snapshot_seeds OUT_DIR FILE...: writes OUT_DIR/<file name>.json, the snapshot of each
// capture (numactl* files through import_numactl, others through import_rocminfo), so that
// fuzz_snapshot starts from real models rather than from nothing.
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "umem/core/snapshot.hpp"
#include "umem/importers/numactl_importer.hpp"
#include "umem/importers/rocminfo_importer.hpp"

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fputs("usage: fuzz_snapshot_seeds OUT_DIR FILE...\n", stderr);
    return 2;
  }
  const std::filesystem::path out_dir = argv[1];
  try {
    for (int i = 2; i < argc; ++i) {
      const std::filesystem::path in = argv[i];
      std::ifstream f(in, std::ios::binary);
      std::ostringstream text;
      text << f.rdbuf();
      umem::topology t;
      if (in.filename().string().starts_with("numactl"))
        t.numa = umem::importers::import_numactl(text.str(), in.string()).numa;
      else
        t = umem::importers::import_rocminfo(text.str(), in.string()).topo;
      std::ofstream(out_dir / (in.filename().string() + ".json")) << umem::snapshot_to_json(t);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fuzz_snapshot_seeds: %s\n", e.what());
    return 1;
  }
  return 0;
}
