#include <gtest/gtest.h>

#include "umem/core/topology.hpp"

namespace umem {
namespace {

TEST(MemoryPool, CoherenceFromFlags) {
  memory_pool p;
  p.global_flags = pool_flag::kernarg_init | pool_flag::fine_grained;
  EXPECT_EQ(p.coherence_kind(), coherence::fine);
  EXPECT_TRUE(p.is_kernarg());
  p.global_flags = pool_flag::extended_scope_fine_grained;
  EXPECT_EQ(p.coherence_kind(), coherence::extended_fine);
  p.global_flags = pool_flag::coarse_grained;
  EXPECT_EQ(p.coherence_kind(), coherence::coarse);
  p.segment = pool_segment::group;
  EXPECT_EQ(p.coherence_kind(), coherence::unknown);
}

TEST(Agent, PciAddressFromBdfid) {
  agent a;
  a.bdfid = 16640;  // 0x4100: bus 0x41, device 0, function 0 (4-socket MI300A GPU 1)
  EXPECT_EQ(a.pci_address(), "0000:41:00.0");
  a.pci_domain = 2;
  a.bdfid = (0x02u << 8) | (0x1fu << 3) | 0x7u;
  EXPECT_EQ(a.pci_address(), "0002:02:1f.7");
}

TEST(Topology, XnackFromRuntimeThenIsa) {
  topology t;
  EXPECT_FALSE(t.xnack_enabled().has_value());
  agent g;
  g.kind = agent_kind::gpu;
  g.isas = {"amdgcn-amd-amdhsa--gfx942:sramecc+:xnack+"};
  t.agents.push_back(g);
  EXPECT_EQ(t.xnack_enabled(), true);
  g.isas = {"amdgcn-amd-amdhsa--gfx942:sramecc+:xnack-"};
  t.agents.push_back(g);
  EXPECT_EQ(t.xnack_enabled(), false) << "one xnack- GPU makes the process XNACK-off";
  t.hsa.xnack_enabled = true;
  EXPECT_EQ(t.xnack_enabled(), true) << "the runtime's own answer wins";
}

}  // namespace
}  // namespace umem
