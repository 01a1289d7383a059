#include "report.hpp"

#include <gtest/gtest.h>

#include "capture_model.hpp"
#include "support/golden.hpp"

namespace umem::umtopo {
namespace {

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

void expect_golden(const std::string& actual, const std::string& name) {
  test::expect_golden(actual, std::filesystem::path(__FILE__).parent_path() / "golden" / name);
}

TEST(Report, FourSocketCaptureMatchesGolden) {
  UMEM_REQUIRE_MI300A_4SOCKET(topo);
  expect_golden(render_report(topo), "mi300a_4socket_report.txt");
}

TEST(Report, FourSocketSummaryFitsOneScreen) {
  UMEM_REQUIRE_MI300A_4SOCKET(topo);
  const std::string r = render_report(topo, report_detail::summary);
  expect_golden(r, "mi300a_4socket_summary.txt");
  std::size_t lines = 0, widest = 0;
  for (std::size_t at = 0, next; at < r.size(); at = next + 1, ++lines) {
    next = r.find('\n', at);
    if (next == std::string::npos) next = r.size();
    if (!contains(r.substr(at, next - at), "Sources:")) widest = std::max(widest, next - at);
  }
  EXPECT_LE(lines, 24u) << r;
  EXPECT_LE(widest, 100u) << "every line but the sources fits a 100-column terminal:\n" << r;
  // One row per GPU agent with its socket's CPUs, memory and GPU-allocatable share (N:4,6; R:334).
  EXPECT_TRUE(contains(r, "0    0-23,96-119 (48)    125.2 GiB   KFD 4    gfx942  -     yes 0000:02:00.0  94.1 GiB (75.1%)\n"))
      << r;
  EXPECT_TRUE(contains(r, "NUMA distances: 10 local, 32 remote\n")) << r;
  EXPECT_TRUE(contains(r, "GPU agents, KFD nodes 4-7: coarse, extended_fine, fine 94.1 GiB; group 64 KiB\n")) << r;
}

TEST(Report, NothingAtAllSaysWhy) {
  topology t;
  t.hsa.state = runtime_state::no_driver;
  t.hsa.state_reason = "/dev/kfd does not exist";
  const std::string r = render_report(t);
  EXPECT_TRUE(contains(r, "no AMD GPU runtime: /dev/kfd does not exist\n")) << r;
  EXPECT_TRUE(contains(r, "No NUMA node and no agent in the model.")) << r;
  EXPECT_TRUE(contains(r, "NUMA distances: unknown")) << r;
  EXPECT_TRUE(contains(r, "Sources: none")) << r;
  EXPECT_TRUE(contains(render_report(topology{}), "no AMD GPU runtime: no GPU runtime was probed"));
  // The summary says the missing runtime once, not again as "Runtime:" and "GPU backend: none".
  t.gpu_backend = {"none", "/dev/kfd does not exist and no CUDA driver"};
  const std::string s = render_report(t, report_detail::summary);
  EXPECT_TRUE(contains(s, "no AMD GPU runtime: /dev/kfd does not exist\n")) << s;
  EXPECT_EQ(s.find("/dev/kfd does not exist"), s.rfind("/dev/kfd does not exist")) << s;
}

TEST(Report, NumactlOnly) {
  UMEM_REQUIRE_FIXTURE(path, test::kNumactl4Socket);
  topology t;
  t.numa = importers::import_numactl(test::read_text(path), "numactl").numa;
  const std::string r = render_report(t);
  EXPECT_TRUE(contains(r, "no AMD GPU runtime: no GPU runtime was probed")) << r;
  EXPECT_TRUE(contains(r, "Socket on NUMA node 3\n  CPUs:   72-95,168-191 (48 CPUs)\n"
                          "  Memory: 125.6 GiB (NUMA node)\n"  // N:15 128661 MB
                          "  CPU agent: none in the model\n  GPU agent: none bound to this node\n"))
      << r;
  EXPECT_FALSE(contains(r, "GPU-allocatable")) << r;
}

TEST(Report, RocminfoOnly) {
  UMEM_REQUIRE_FIXTURE(path, test::kRocminfo4Socket);
  const topology t = importers::import_rocminfo(test::read_text(path), "rocminfo").topo;
  const std::string r = render_report(t);
  // R:53 130750360 KB = 124.7 GiB from the CPU agent's pool; no CPU list without NUMA data.
  EXPECT_TRUE(contains(r, "Socket on NUMA node 0\n  CPUs:   unknown (no NUMA data for this node)\n"
                          "  Memory: 124.7 GiB (largest CPU agent pool; no NUMA data)\n"))
      << r;
  EXPECT_TRUE(contains(r, "Agents without a NUMA node\n  GPU agent, KFD node 4")) << r;
  EXPECT_TRUE(contains(r, "  GPU KFD node 7: not mapped (no binding in the model)\n")) << r;
  EXPECT_TRUE(contains(r, "NUMA distances: unknown (no NUMA data in the model)")) << r;
}

}  // namespace
}  // namespace umem::umtopo
