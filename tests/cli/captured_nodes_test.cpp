// Every real capture as a test case, in the manner of hwloc's tests/hwloc/linux: a folder under
// captures/ holds a `manifest` (a '#' line saying what the node is, then one "<umtopo input flag
// without --> <capture file>" line per input) and what umtopo printed for it: umtopo.txt (the
// default report), umtopo-verbose.txt (--verbose) and check.txt (`umtopo check`). The outputs
// are goldens (Note [Golden update switch] in support/golden.hpp). A capture is looked up in the
// bundled data/machines first, then in the shared fixtures; a case whose capture is absent skips
// naming it. umtopo runs in a folder of links to the captures, so the outputs name files, not
// this machine's paths.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <sstream>

#include "support/command.hpp"
#include "support/golden.hpp"

namespace fs = std::filesystem;

namespace {

const fs::path kCases = fs::path(__FILE__).parent_path() / "captures";

// stderr joins stdout: a warning printed for a capture is part of what is expected.
umem::test::command_result run_in(const fs::path& dir, const std::string& args) {
  return umem::test::run_command("cd '" + dir.string() + "' && " + UMTOPO_PATH + " " + args + " 2>&1");
}

class CapturedNode : public testing::TestWithParam<std::string> {};

TEST_P(CapturedNode, OutputsMatchTheGoldens) {
  const fs::path dir = kCases / GetParam();
  const fs::path work = fs::temp_directory_path() / ("umtopo_case_" + GetParam() + "_" + std::to_string(getpid()));
  fs::create_directories(work);
  std::istringstream manifest(umem::test::read_text(dir / "manifest"));
  std::string args;
  for (std::string flag, file; manifest >> flag;) {
    if (flag.starts_with("#")) {
      std::getline(manifest, file);
      continue;
    }
    manifest >> file;
    fs::path found = umem::test::bundled_dir() / file;
    if (!fs::exists(found)) found = umem::test::fixtures_dir() / file;
    if (!fs::exists(found)) {
      fs::remove_all(work);
      GTEST_SKIP() << "needs the real capture " << file << " (in data/machines or UMEM_FIXTURES_DIR)";
    }
    fs::create_symlink(found, work / file);
    args += " --" + flag + " " + file;
  }
  ASSERT_FALSE(args.empty()) << dir / "manifest" << " names no input";

  const auto report = run_in(work, args);
  EXPECT_EQ(report.status, 0) << report.out;
  umem::test::expect_golden(report.out, dir / "umtopo.txt");
  const auto verbose = run_in(work, args + " --verbose");
  EXPECT_EQ(verbose.status, 0) << verbose.out;
  umem::test::expect_golden(verbose.out, dir / "umtopo-verbose.txt");
  const auto check = run_in(work, args + " check");
  const bool errors = check.out.find("\n0 error(s)") == std::string::npos;
  EXPECT_EQ(check.status, errors ? 1 : 0) << "exit 1 exactly when check reports errors:\n" << check.out;
  umem::test::expect_golden(check.out, dir / "check.txt");
  fs::remove_all(work);
}

std::vector<std::string> cases() {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(kCases))
    if (fs::exists(e.path() / "manifest")) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

INSTANTIATE_TEST_SUITE_P(Captures, CapturedNode, testing::ValuesIn(cases()),
                         [](const testing::TestParamInfo<std::string>& i) { return i.param; });

}  // namespace
