// umtopo as a user runs it: a subprocess, its output, its exit status.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "support/command.hpp"
#include "support/fixtures.hpp"
#include "umem/core/snapshot.hpp"

namespace fs = std::filesystem;

namespace {

using run_result = umem::test::command_result;

run_result run_umtopo_env(const std::string& env, const std::string& args) {
  return umem::test::run_command(env + " " + std::string(UMTOPO_PATH) + " " + args);
}

run_result run_umtopo(const std::string& args) { return run_umtopo_env("", args); }

std::string q(const fs::path& p) { return "'" + p.string() + "'"; }

const char* kRocminfo4 = "rocminfo_mi300a_4socket_supermicro_h13qsh_ROCm-ROCm_4688.txt";
const char* kNumactl4 = "numactl_mi300a_4socket_mzank_gpu-benchmarks-hip.txt";

TEST(UmtopoCli, LiveMachineReportsNoAmdGpuPlainly) {
  if (fs::exists("/dev/kfd")) GTEST_SKIP() << "this machine has an AMD GPU driver";
  const auto r = run_umtopo("");
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("no AMD GPU"), std::string::npos) << r.out;
  EXPECT_EQ(r.err.find("error"), std::string::npos) << r.err;
}

TEST(UmtopoCli, LiveJsonIsASnapshot) {
  const auto r = run_umtopo("--json");
  ASSERT_EQ(r.status, 0) << r.err;
  const auto t = umem::snapshot_from_json(r.out, "umtopo --json");
  EXPECT_GE(t.numa.nodes.size(), 1u) << "hwloc sees at least this machine's one NUMA node";
}

TEST(UmtopoCli, CaptureThenSnapshotReplaysIdentically) {
  UMEM_REQUIRE_FIXTURE(rocminfo, kRocminfo4);
  UMEM_REQUIRE_FIXTURE(numactl, kNumactl4);
  const fs::path snap = fs::temp_directory_path() / "umtopo_cli_capture.json";
  const auto first = run_umtopo("--rocminfo " + q(rocminfo) + " --numactl " + q(numactl) +
                                " --capture " + q(snap) + " --json");
  ASSERT_EQ(first.status, 0) << first.err;
  const auto replay = run_umtopo("--snapshot " + q(snap) + " --json");
  ASSERT_EQ(replay.status, 0) << replay.err;
  EXPECT_EQ(replay.out, first.out);
  EXPECT_EQ(umem::load_snapshot(snap), umem::snapshot_from_json(first.out));
  const auto report_a = run_umtopo("--rocminfo " + q(rocminfo) + " --numactl " + q(numactl));
  const auto report_b = run_umtopo("--snapshot " + q(snap));
  EXPECT_EQ(report_a.out, report_b.out);
  fs::remove(snap);
}

TEST(UmtopoCli, CheckOnCapturedMi300aFindsTtmAndXnackErrors) {
  UMEM_REQUIRE_FIXTURE(rocminfo, kRocminfo4);
  UMEM_REQUIRE_FIXTURE(numactl, kNumactl4);
  const auto r = run_umtopo("check --json --rocminfo " + q(rocminfo) + " --numactl " + q(numactl));
  EXPECT_EQ(r.status, 1) << "errors found => exit 1\n" << r.out << r.err;
  const auto j = nlohmann::json::parse(r.out);
  std::set<std::string> errors;
  for (const auto& f : j["findings"])
    if (f["severity"] == "error") errors.insert(f["id"].get<std::string>());
  EXPECT_TRUE(errors.count("xnack-off")) << r.out;
  EXPECT_TRUE(errors.count("ttm-limit")) << r.out;
  EXPECT_EQ(j["errors"].get<std::size_t>(), errors.size());
}

TEST(UmtopoCli, BadInputsGiveOneReadableLineAndExit2) {
  struct bad_case {
    std::string args;
    std::string needle;
  };
  const fs::path garbage = fs::temp_directory_path() / "umtopo_cli_garbage.txt";
  {
    std::FILE* f = std::fopen(garbage.c_str(), "w");
    std::fputs("this is not rocminfo output\n", f);
    std::fclose(f);
  }
  const std::vector<bad_case> cases = {
      {"--rocminfo /nonexistent/rocminfo.txt", "/nonexistent/rocminfo.txt"},
      {"--snapshot " + q(garbage), "not valid JSON"},
      {"--rocminfo " + q(garbage), garbage.string()},
      {"--numactl " + q(garbage), garbage.string()},
      {"--hwloc-xml " + q(garbage), garbage.string()},
      {"--no-such-flag", "no-such-flag"},
  };
  for (const auto& c : cases) {
    const auto r = run_umtopo(c.args);
    EXPECT_EQ(r.status, 2) << c.args << "\n" << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << c.args << "\n" << r.err;
    EXPECT_EQ(r.err.rfind("umtopo: error: ", 0), 0u) << r.err;
    EXPECT_NE(r.err.find(c.needle), std::string::npos) << c.args << "\n" << r.err;
    EXPECT_TRUE(r.out.empty()) << r.out;
  }
  fs::remove(garbage);
}

TEST(UmtopoCli, OptionsListsTheTable) {
  const auto r = run_umtopo("--options");
  EXPECT_EQ(r.status, 0);
  EXPECT_NE(r.out.find("UMEM_LOG_LEVEL"), std::string::npos);
  EXPECT_NE(r.out.find("UMEM_HSA_RUNTIME_LIB"), std::string::npos);
  EXPECT_NE(r.out.find("limit.node<N>"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Effective allocator options: policy:local"), std::string::npos) << r.out;
}

TEST(UmtopoCli, MalformedAllocConfIsOneLineNamingTheKey) {
  const auto r = run_umtopo_env("UMEM_ALLOC_CONF=polcy:node:1", "--options");
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_NE(r.err.find("unknown key 'polcy'"), std::string::npos) << r.err;
}

}  // namespace
