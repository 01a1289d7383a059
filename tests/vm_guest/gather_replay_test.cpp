// Inside the multi-NUMA VM (tests/vm): umtopo gathers this 4-node machine's raw inputs and the
// replay of the gather reports what the live machine reports (`--verbose` and `check`), the
// Sources line aside, as docs/umtopo.md promises for a user's node.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "support/command.hpp"
#include "support/report_text.hpp"

namespace {

namespace fs = std::filesystem;

// The guest's umtopo: /init runs every program from /tests (tests/vm/guest-init.sh).
constexpr const char* guest_umtopo = "/tests/umtopo";

TEST(vm_gather, the_replay_of_this_nodes_gather_equals_its_live_report) {
  if (std::getenv("UMEM_VM_EXPECT_NODES") == nullptr)
    GTEST_SKIP() << "UMEM_VM_EXPECT_NODES is unset: this test runs inside the VM only";
  if (!fs::exists(guest_umtopo)) GTEST_SKIP() << guest_umtopo << " is not in this initramfs";
  const std::string gather = (fs::temp_directory_path() / "vm-node.tar.gz").string();
  const std::string umtopo = guest_umtopo;
  // --gather prints the live report of the inputs it wrote: the same moment as the gather.
  const auto live = umem::test::run_command(umtopo + " --gather " + gather + " --verbose");
  ASSERT_EQ(live.status, 0) << live.err;
  const auto replay = umem::test::run_command(umtopo + " --from-gather " + gather + " --verbose");
  ASSERT_EQ(replay.status, 0) << replay.err;
  EXPECT_NE(live.out.find("umtopo: 4 NUMA nodes,"), std::string::npos) << live.out;
  EXPECT_EQ(umem::test::without_sources(replay.out), umem::test::without_sources(live.out));
  EXPECT_EQ(umem::test::run_command(umtopo + " --from-gather " + gather + " check").out,
            umem::test::run_command(umtopo + " check").out);
  fs::remove(gather);
}

}  // namespace
