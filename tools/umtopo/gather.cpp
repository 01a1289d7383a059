#include "gather.hpp"

#include <sys/utsname.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>

#include "gather_inputs.hpp"
#include "tar_gz.hpp"
#include "umem/core/error.hpp"
#include "umem/core/options.hpp"
#include "umem/core/snapshot.hpp"
#include "umem/core/detail/text.hpp"

namespace umem::umtopo {
namespace {

// Only what the runtime backends answered; the sysfs-derived parts are replayed from root/.
topology runtime_answers(const topology& live) {
  topology r;
  r.hostname = live.hostname;
  r.hsa = live.hsa;
  r.agents = live.agents;
  r.cuda = live.cuda;
  r.gpu_backend = live.gpu_backend;
  return r;
}

gather_manifest make_manifest(const raw_inputs& raw) {
  gather_manifest m;
  m.date = umem::detail::utc_now("%Y-%m-%dT%H:%M:%SZ");
  utsname u{};
  if (uname(&u) == 0) {
    m.kernel_release = u.release;
    m.kernel_version = u.version;
    m.machine = u.machine;
  }
  m.umem_version = UMEM_VERSION_STRING;
  m.absent = raw.absent;
  m.unreadable = raw.unreadable;
  for (const auto& opt : env_options())
    if (auto v = env_value(opt.env_name)) m.umem_environment[opt.env_name] = *v;
  return m;
}

}  // namespace

std::optional<std::string> run_rocminfo(std::string& why) {
  // 127 is the shell's "command not found"; timeout keeps a wedged driver from hanging the gather.
  FILE* p = popen("command -v rocminfo >/dev/null 2>&1 || exit 127; "
                  "if command -v timeout >/dev/null 2>&1; then exec timeout 120 rocminfo 2>&1; fi; exec rocminfo 2>&1",
                  "r");
  if (p == nullptr) {
    why = "rocminfo: could not start a shell";
    return std::nullopt;
  }
  std::string text;
  std::array<char, 4096> buf{};
  for (std::size_t n; (n = std::fread(buf.data(), 1, buf.size(), p)) > 0;) text.append(buf.data(), n);
  const int status = pclose(p);
  const int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  if (code == 0) return text;
  why = code == 127 ? "rocminfo: the command is not installed" : "rocminfo: exited with status " + std::to_string(code);
  return std::nullopt;
}

gather_manifest write_gather(const std::filesystem::path& file, const fs_root& root, const topology& live,
                             const std::optional<std::string>& rocminfo, const std::string& rocminfo_absent_why) {
  const topology runtime = runtime_answers(live);
  raw_inputs raw = collect_raw_inputs(root, runtime);
  gather_manifest manifest = make_manifest(raw);
  if (!rocminfo) manifest.absent.push_back(rocminfo_absent_why);

  std::vector<tar_entry> entries = {{kManifestEntry, false, manifest_to_json(manifest)},
                                    {kRuntimeEntry, false, snapshot_to_json(runtime)},
                                    {kRootEntry, true, {}}};
  if (rocminfo) entries.push_back({kRocminfoEntry, false, *rocminfo});
  for (auto& e : raw.entries) {
    e.name = std::string(kRootEntry) + "/" + e.name;
    entries.push_back(std::move(e));
  }
  write_tar_gz(file, entries);
  return manifest;
}

}  // namespace umem::umtopo
