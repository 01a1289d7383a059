// umtopo: what the GPU and CPU of this node (or of a captured node) can really use, and what is
// misconfigured. Exit status: 0 fine, 1 `check` found errors, 2 bad usage or unreadable input.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "checks.hpp"
#include "drawing.hpp"
#include "gather.hpp"
#include "inputs.hpp"
#include "report.hpp"
#include "umem/allocator/alloc_config.hpp"
#include "umem/core/error.hpp"
#include "umem/core/fs_root.hpp"
#include "umem/core/options.hpp"
#include "umem/core/snapshot.hpp"

namespace {

constexpr int kExitFindings = 1;
constexpr int kExitUsage = 2;

std::string findings_json(const std::vector<umem::umtopo::finding>& findings) {
  nlohmann::json list = nlohmann::json::array();
  int errors = 0;
  for (const auto& f : findings) {
    const char* level = f.level == umem::umtopo::severity::error     ? "error"
                        : f.level == umem::umtopo::severity::warning ? "warning"
                                                                     : "info";
    errors += f.level == umem::umtopo::severity::error;
    list.push_back({{"id", f.id}, {"severity", level}, {"title", f.title},
                    {"evidence", f.evidence}, {"fix", f.fix}});
  }
  return nlohmann::json{{"findings", list}, {"errors", errors}}.dump(2) + "\n";
}

void print_options() {
  std::printf("Environment:\n");
  for (const auto& opt : umem::env_options()) {
    const auto value = umem::env_value(opt.env_name);
    std::printf("  %-22s = %-28s %s (default: %s)\n", opt.env_name,
                value ? value->c_str() : "(unset)", opt.doc, opt.default_text);
  }
  std::printf("\nUMEM_ALLOC_CONF keys (key:value, comma separated):\n");
  for (const auto& row : umem::alloc::alloc_option_table())
    std::printf("  %-14s %-44s default %-6s %s\n", std::string(row.key).c_str(),
                std::string(row.type).c_str(), std::string(row.default_value).c_str(),
                std::string(row.doc).c_str());
  // Throws, like the allocator would, when UMEM_ALLOC_CONF is malformed.
  std::printf("\nEffective allocator options: %s\n",
              umem::alloc::describe(umem::alloc::options_from_environment()).c_str());
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"umtopo: unified-memory topology and configuration inspector for APU nodes.\n"
               "Without inputs it inspects this machine; with any capture it replays that "
               "capture alone."};
  app.set_version_flag("--version", "umtopo " UMEM_VERSION_STRING);
  umem::umtopo::inputs in;
  bool json = false;
  bool options = false;
  bool verbose = false;
  std::string capture;
  std::string gather;
  std::string draw;
  app.add_option("--snapshot", in.snapshot, "Replay a snapshot written by --capture")
      ->check(CLI::ExistingFile);
  app.add_option("--rocminfo", in.rocminfo, "Import `rocminfo` output (ROCm 5.x-7.x)")
      ->check(CLI::ExistingFile);
  app.add_option("--numactl", in.numactl, "Import `numactl --hardware` output")
      ->check(CLI::ExistingFile);
  app.add_option("--hwloc-xml", in.hwloc_xml, "Read NUMA nodes from an hwloc XML export")
      ->check(CLI::ExistingFile);
  app.add_option("--sysfs-root", in.sysfs_root,
                 "Read KFD topology and kernel knobs under this directory (a captured tree)")
      ->check(CLI::ExistingDirectory);
  app.add_option("--kfd-properties", in.kfd_properties,
                 "Import `cat /sys/class/kfd/kfd/topology/nodes/*/properties` output")
      ->check(CLI::ExistingFile);
  auto* from_gather = app.add_option("--from-gather", in.gather, "Replay a node gathered by --gather")
                          ->check(CLI::ExistingFile);
  app.add_option("--capture", capture, "Write the model as a JSON snapshot to FILE");
  auto* gather_opt = app.add_option("--gather", gather,
                                    "Write this node's raw discovery inputs to FILE (.tar.gz) for exact replay");
  app.add_option("--draw", draw, "Draw the node to FILE: .svg, or .png through rsvg-convert");
  app.add_flag("--verbose", verbose, "Every pool, agent detail, the distance matrix and mapping evidence");
  app.add_flag("--json", json, "Print the model (or check findings) as JSON");
  app.add_flag("--options", options, "Print umem's environment options and their values");
  auto* check = app.add_subcommand("check", "Report misconfigurations; exit 1 on errors");
  check->fallthrough();
  // A gather is a whole node: a snapshot or another sysfs tree cannot be layered on it, and
  // --gather records this node, so it takes no capture at all.
  from_gather->excludes(app.get_option("--snapshot"));
  from_gather->excludes(app.get_option("--sysfs-root"));
  for (const char* name : {"--snapshot", "--rocminfo", "--numactl", "--hwloc-xml", "--sysfs-root", "--kfd-properties",
                           "--from-gather"})
    gather_opt->excludes(app.get_option(name));

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "umtopo: error: %s (see umtopo --help)\n", e.what());
    return kExitUsage;
  }

  try {
    if (options) {
      print_options();
      return 0;
    }
    const auto model = umem::umtopo::assemble(in);
    for (const auto& w : model.warnings) std::fprintf(stderr, "umtopo: warning: %s\n", w.c_str());
    if (!gather.empty()) {
      std::string rocminfo_why;
      const auto rocminfo = umem::umtopo::run_rocminfo(rocminfo_why);
      const auto m = umem::umtopo::write_gather(gather, umem::fs_root("/"), model.topo, rocminfo, rocminfo_why);
      std::fprintf(stderr, "umtopo: gather written to %s (%zu inputs absent on this node, %zu unreadable)\n",
                   gather.c_str(), m.absent.size(), m.unreadable.size());
    }
    if (!capture.empty()) {
      umem::save_snapshot(model.topo, capture);
      std::fprintf(stderr, "umtopo: snapshot written to %s\n", capture.c_str());
    }
    const auto findings = umem::umtopo::run_checks(model.topo);
    if (!draw.empty()) {
      umem::umtopo::write_drawing(draw, umem::umtopo::render_svg(model.topo, findings));
      std::fprintf(stderr, "umtopo: drawing written to %s\n", draw.c_str());
    }
    if (check->parsed()) {
      std::cout << (json ? findings_json(findings) : umem::umtopo::render_findings(findings));
      return umem::umtopo::has_errors(findings) ? kExitFindings : 0;
    }
    std::cout << (json ? umem::snapshot_to_json(model.topo)
                       : umem::umtopo::render_report(model.topo, verbose ? umem::umtopo::report_detail::full
                                                                         : umem::umtopo::report_detail::summary));
    return 0;
  } catch (const umem::error& e) {
    std::fprintf(stderr, "umtopo: error: %s\n", e.what());
    return kExitUsage;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "umtopo: internal error: %s\n", e.what());
    return kExitUsage;
  }
}
