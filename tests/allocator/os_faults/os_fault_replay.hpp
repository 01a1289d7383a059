// One single-threaded workload replayed while the OS calls fail by a plan (os_call_faults.hpp),
// with the checks every such run makes: each failure one umem::error(out_of_memory) naming the
// call, or recovered; the accounting against the kernel (os_fault_allocator.hpp) before and after
// everything is freed; serving again once the calls succeed; umem's mappings gone afterwards and,
// without a sanitizer, the process's anonymous mappings back to their baseline.
#pragma once

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "os_call_faults.hpp"

namespace umem::test {

struct step {
  enum class op { alloc, free, trim } what = op::alloc;
  std::size_t id = 0;     // alloc, free: which block (ids are dense from 0)
  std::size_t bytes = 0;  // alloc
};

struct workload {
  std::string name;
  std::string conf;  // UMEM_ALLOC_CONF of its allocator
  std::vector<step> steps;
  // Write every page of every block it gets and check it before the free. Needed where pages are
  // given back (accounting::pages_given_back): a page comes back on touch; large sizes must then
  // be multiples of the pool's 2 MiB granule, so that what a block takes back is all touched.
  bool touch = false;
  std::vector<std::size_t> serve_after;  // sizes asked for once the calls succeed again
};

struct run_result {
  std::size_t calls = 0;     // counted calls (os_faults::calls())
  std::size_t injected = 0;  // failed calls
  int errors = 0;            // out_of_memory errors the workload saw
};

run_result replay_with_faults(const workload& w, const os_faults::plan& p);

struct sweep_result {
  std::size_t calls = 0;  // counted calls of the clean run: N = 1..calls were failed
  std::size_t injected = 0, skipped = 0, recovered = 0;
  int errors = 0;
  std::vector<std::pair<std::string, std::size_t>> clean_calls_by_kind;  // all kinds
};

// A clean run (which must see no error), then one run per N failing the Nth counted call (of
// kind `only` when given), once or from N on; stops at the first N with a failed expectation.
sweep_result sweep(const workload& w, bool persistent, const std::string& only = {});

}  // namespace umem::test
