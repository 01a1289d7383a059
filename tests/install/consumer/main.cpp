// Uses the installed headers and library: builds a model, round-trips it through a snapshot.
#include <umem/core/snapshot.hpp>
#include <umem/core/topology.hpp>

#include <cstdio>

int main() {
  umem::topology t;
  t.hostname = "installed";
  umem::agent gpu;
  gpu.kind = umem::agent_kind::gpu;
  gpu.isas = {"amdgcn-amd-amdhsa--gfx942:sramecc+:xnack-"};
  t.agents.push_back(gpu);
  const auto back = umem::snapshot_from_json(umem::snapshot_to_json(t));
  if (!(back == t) || back.xnack_enabled() != false) return 1;
  std::puts("consumer: ok");
  return 0;
}
