// `umtopo check`: what on this node keeps the CPU and GPU from sharing memory well, each finding
// with the evidence it saw and a concrete fix (platform.md, "What administrators tune").
//
// Every check yields exactly one finding, in a fixed order: a warning or error when the model
// shows a problem, info "ok: ..." when it shows none, and info "not checked: ..." when the model
// lacks the input (a snapshot of numactl text alone cannot say anything about XNACK).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "umem/core/topology.hpp"

namespace umem::umtopo {

enum class severity { info, warning, error };

const char* to_string(severity);

struct finding {
  std::string id;  // stable name of the check: "xnack-off", "ttm-limit", ...
  severity level = severity::info;
  std::string title;
  std::string evidence;  // the files, values or pool sizes the check looked at
  std::string fix;       // empty when there is nothing to do
};

std::vector<finding> run_checks(const topology& topo);
// Errors first, then warnings, then info; a summary line at the end.
std::string render_findings(const std::vector<finding>& findings);
bool has_errors(const std::vector<finding>& findings);

// The TTM pages_limit (4 KiB pages) that makes `total_memory_bytes` GPU-allocatable: rounded up.
std::uint64_t ttm_pages_for(std::uint64_t total_memory_bytes);

}  // namespace umem::umtopo
