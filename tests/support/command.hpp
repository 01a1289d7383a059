// Running a command as a user would (through /bin/sh) and keeping what it printed.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <stdexcept>
#include <string>

#include "support/fixtures.hpp"

namespace umem::test {

struct command_result {
  int status;       // exit status; -1 when killed by a signal
  std::string out;  // stdout
  std::string err;  // stderr
};

inline command_result run_command(const std::string& command) {
  const auto err_file = std::filesystem::temp_directory_path() / ("umem_cmd_err_" + std::to_string(getpid()));
  const std::string cmd = command + " 2>'" + err_file.string() + "'";
  command_result r{};
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) throw std::runtime_error("popen failed: " + command);
  std::array<char, 4096> buf{};
  for (std::size_t n; (n = std::fread(buf.data(), 1, buf.size(), p)) > 0;) r.out.append(buf.data(), n);
  const int raw = pclose(p);
  r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  r.err = read_text(err_file);
  std::filesystem::remove(err_file);
  return r;
}

}  // namespace umem::test
