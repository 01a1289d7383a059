// `umtopo --gather` on this machine and `--from-gather` of it, as a user runs them.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "support/fixtures.hpp"

namespace fs = std::filesystem;

namespace {

struct run_result {
  int status;
  std::string out, err;
};

run_result umtopo(const std::string& args) {
  const fs::path err_file = fs::temp_directory_path() / ("umtopo_gather_err_" + std::to_string(getpid()));
  const std::string cmd = std::string(UMTOPO_PATH) + " " + args + " 2>'" + err_file.string() + "'";
  run_result r{};
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) throw std::runtime_error("popen failed");
  std::array<char, 4096> buf{};
  for (std::size_t n; (n = fread(buf.data(), 1, buf.size(), p)) > 0;) r.out.append(buf.data(), n);
  const int raw = pclose(p);
  r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  r.err = umem::test::read_text(err_file);
  fs::remove(err_file);
  return r;
}

fs::path temp(const std::string& name) { return fs::temp_directory_path() / (std::to_string(getpid()) + "_" + name); }

// The report without its Sources line, which names where the model came from.
std::string without_sources(const std::string& report) {
  std::string out;
  for (std::size_t at = 0, next; at < report.size(); at = next + 1) {
    next = std::min(report.find('\n', at), report.size());
    const std::string line = report.substr(at, next - at);
    if (!line.starts_with("Sources: ")) out += line + "\n";
  }
  return out;
}

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
