#include "umem/allocator/detail/pool/reclaim_ladder.hpp"

#include <utility>

namespace umem::alloc {

const char* to_string(rung r) {
  switch (r) {
    case rung::first_try: return "first try";
    case rung::thread_caches: return "thread caches";
    case rung::stream_blocks: return "blocks whose streams finished";
    case rung::trim: return "trim";
    case rung::spill: return "spill";
  }
  return "?";
}

attempt_result climb(const reclaim_rungs& rungs, reclaim_report& report) {
  attempt_result a = rungs.attempt();
  if (a.p) return a;
  return climb_after(std::move(a), rungs, report);
}

attempt_result climb_after(attempt_result a, const reclaim_rungs& rungs, reclaim_report& report) {
  const std::pair<rung, const std::function<std::size_t()>*> releasing[] = {
      {rung::thread_caches, &rungs.thread_caches},
      {rung::stream_blocks, &rungs.stream_blocks},
      {rung::trim, &rungs.trim}};
  std::string tried;
  for (const auto& [which, release] : releasing) {
    if (!*release) continue;
    const std::size_t bytes = (*release)();
    if (bytes == 0) continue;
    report.released += bytes;
    tried += std::string(tried.empty() ? "" : ", ") + to_string(which) + " (" +
             std::to_string(bytes) + " bytes)";
    if (rungs.retried) rungs.retried();
    ++report.retries;
    a = rungs.attempt();
    if (a.p) {
      report.served_by = which;
      return a;
    }
  }
  a.why += tried.empty() ? "; nothing could be given back to retry"
                         : "; even after giving back " + tried + " and retrying";
  if (rungs.spill) {
    attempt_result s = rungs.spill();
    if (s.p) {
      report.served_by = rung::spill;
      return s;
    }
    a.why += "; " + s.why;
  }
  return a;
}

}  // namespace umem::alloc
