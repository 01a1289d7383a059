// `umtopo --gather` on this machine and `--from-gather` of it, as a user runs them.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "support/command.hpp"
#include "support/report_text.hpp"

namespace fs = std::filesystem;

namespace {

using umem::test::without_sources;

umem::test::command_result umtopo(const std::string& args) {
  return umem::test::run_command(std::string(UMTOPO_PATH) + " " + args);
}

fs::path temp(const std::string& name) { return fs::temp_directory_path() / (std::to_string(getpid()) + "_" + name); }

TEST(GatherCli, ReplayOfThisNodeEqualsItsLiveReport) {
  const fs::path g = temp("node.tar.gz");
  const auto live = umtopo("--gather '" + g.string() + "' --verbose");
  ASSERT_EQ(live.status, 0) << live.err;
  EXPECT_NE(live.err.find("umtopo: gather written to " + g.string()), std::string::npos) << live.err;
  const auto replay = umtopo("--from-gather '" + g.string() + "' --verbose");
  ASSERT_EQ(replay.status, 0) << replay.err;
  EXPECT_EQ(without_sources(replay.out), without_sources(live.out));
  EXPECT_NE(replay.out.find("Sources: gather:" + g.filename().string() + "\n"), std::string::npos) << replay.out;
  EXPECT_EQ(umtopo("--from-gather '" + g.string() + "'").out.size() > 0, true);
  // check on the gather reports what check reports here.
  EXPECT_EQ(umtopo("--from-gather '" + g.string() + "' check").out, umtopo("check").out);
  fs::remove(g);
}

TEST(GatherCli, BadGathersAreOneLineAndExit2) {
  const fs::path g = temp("bad.tar.gz");
  std::ofstream(g) << "not an archive\n";
  auto r = umtopo("--from-gather '" + g.string() + "'");
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(r.err, "umtopo: error: " + g.string() + ": not gzip-compressed; not a gather written by umtopo --gather\n");
  EXPECT_TRUE(r.out.empty()) << r.out;

  // A real tar.gz without a manifest.
  const fs::path dir = temp("plain");
  fs::create_directories(dir);
  std::ofstream(dir / "hello.txt") << "hi\n";
  ASSERT_EQ(std::system(("tar czf '" + g.string() + "' -C '" + dir.string() + "' --format=ustar hello.txt").c_str()), 0);
  r = umtopo("--from-gather '" + g.string() + "' check");
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(r.err, "umtopo: error: " + g.string() + " has no manifest.json; not a gather written by umtopo --gather\n");
  fs::remove_all(dir);

  r = umtopo("--gather '" + g.string() + "' --snapshot '" + g.string() + "'");
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_NE(r.err.find("excludes"), std::string::npos) << r.err;
  fs::remove(g);
}

}  // namespace
