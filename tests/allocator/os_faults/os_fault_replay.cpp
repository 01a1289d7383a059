#include "os_fault_replay.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <iostream>

#include "os_fault_allocator.hpp"
#include "process_maps.hpp"
#include "umem/core/error.hpp"
#include "umem_mappings.hpp"

namespace umem::test {
namespace {

constexpr std::size_t page = 4096;

// The word written at every page of block `id` (touch mode): a block overwritten by another
// one, or handed out twice, shows another block's word.
std::uint64_t tag_of(std::size_t id) { return (id + 1) * 0x9e3779b97f4a7c15ULL; }

void write_tag(void* p, std::size_t bytes, std::uint64_t tag) {
  auto* c = static_cast<unsigned char*>(p);
  for (std::size_t at = 0; at < bytes; at += page) std::memcpy(c + at, &tag, sizeof tag);
}

bool tag_intact(const void* p, std::size_t bytes, std::uint64_t tag) {
  const auto* c = static_cast<const unsigned char*>(p);
  for (std::size_t at = 0; at < bytes; at += page)
    if (std::memcmp(c + at, &tag, sizeof tag) != 0) return false;
  return true;
}

std::string describe(const workload& w, const os_faults::plan& p) {
  std::string s = w.name + ", failing call " + std::to_string(p.fail_at);
  if (!p.only.empty()) s += " of " + p.only;
  return s + (p.persistent ? " and every later one" : "");
}

}  // namespace

run_result replay_with_faults(const workload& w, const os_faults::plan& p) {
  const std::string where = describe(w, p);
  const accounting how{p.persistent, w.touch, w.touch};
  const anonymous_total before = anonymous_mappings(read_process_maps());
  run_result r;
  os_faults::arm(p);
  {
    auto a = make_os_fault_allocator(w.conf);
    struct held {
      void* p = nullptr;
      std::size_t bytes = 0;
    };
    std::vector<held> blocks;
    for (const step& s : w.steps) {
      switch (s.what) {
        case step::op::alloc: {
          if (blocks.size() <= s.id) blocks.resize(s.id + 1);
          try {
            blocks[s.id] = {a->allocate(s.bytes), s.bytes};
            if (w.touch) write_tag(blocks[s.id].p, s.bytes, tag_of(s.id));
          } catch (const umem::error& err) {
            ++r.errors;
            EXPECT_EQ(err.code(), errc::out_of_memory) << where << ": " << err.what();
            const std::string failed = os_faults::first_failed();
            EXPECT_FALSE(failed.empty()) << where << ": an error with no failed call: " << err.what();
            // Persistent failures may surface through a later call of another kind.
            if (!p.persistent) {
              EXPECT_NE(std::string(err.what()).find(failed.substr(0, failed.find('('))),
                        std::string::npos)
                  << where << ": the error names the failed " << failed << ": " << err.what();
            }
          }
          break;
        }
        case step::op::free: {
          held& b = blocks.at(s.id);
          if (w.touch && b.p) {
            EXPECT_TRUE(tag_intact(b.p, b.bytes, tag_of(s.id))) << where << ": block " << s.id;
          }
          EXPECT_NO_THROW(a->deallocate(b.p)) << where;
          b = {};
          break;
        }
        case step::op::trim:
          EXPECT_NO_THROW(a->trim()) << where;
          break;
      }
    }
    os_faults::disarm();
    r.calls = os_faults::calls();
    r.injected = os_faults::injected();
    expect_accounted(*a, where, how);
    // It keeps serving, written to.
    for (std::size_t bytes : w.serve_after) {
      void* q = nullptr;
      EXPECT_NO_THROW(q = a->allocate(bytes)) << where << ": " << bytes << " bytes after it";
      if (!q) continue;
      write_tag(q, w.touch ? bytes : page, tag_of(blocks.size()));
      a->deallocate(q);
    }
    for (const held& b : blocks) a->deallocate(b.p);
    expect_accounted(*a, where + ", all freed", how);
  }
  EXPECT_EQ(umem_mapped_bytes(false), 0u) << where << ": umem's mappings are gone";
  if (!sanitizer_maps_memory) {
    const anonymous_total after = anonymous_mappings(read_process_maps());
    EXPECT_EQ(after.bytes, before.bytes) << where << ": anonymous bytes in /proc/self/maps";
    EXPECT_EQ(after.count, before.count) << where << ": anonymous mappings in /proc/self/maps";
  }
  if (!p.persistent) {
    EXPECT_LE(r.errors, 1) << where << ": one failure, at most one error";
  }
  return r;
}

sweep_result sweep(const workload& w, bool persistent, const std::string& only) {
  const run_result clean = replay_with_faults(w, os_faults::failing(0, false, only));
  EXPECT_EQ(clean.errors, 0) << w.name << " runs without failures";
  sweep_result total;
  total.calls = clean.calls;
  total.clean_calls_by_kind = os_faults::calls_by_kind();
  std::string kinds;
  for (const auto& [kind, n] : total.clean_calls_by_kind)
    kinds += " " + kind + "=" + std::to_string(n);
  std::cout << "[os faults] " << w.name << ": " << clean.calls << " counted OS calls"
            << (only.empty() ? "" : " (" + only + " only)") << ", all calls:" << kinds << '\n';
  for (std::size_t n = 1; n <= clean.calls; ++n) {
    const run_result r =
        replay_with_faults(w, os_faults::failing(n, persistent, only));
    EXPECT_GE(r.injected + os_faults::skipped(), 1u) << w.name << ": call " << n << " was reached";
    total.injected += r.injected;
    total.skipped += os_faults::skipped();
    total.errors += r.errors;
    if (r.injected > 0 && r.errors == 0) ++total.recovered;
    if (::testing::Test::HasFailure()) break;  // one failing N tells the story
  }
  std::cout << "[os faults] " << w.name << (only.empty() ? "" : ", " + only + " only")
            << (persistent ? " (persistent)" : " (once)") << ": " << total.injected
            << " failures injected over N = 1.." << clean.calls << ", " << total.errors
            << " out_of_memory errors, " << total.recovered
            << " runs recovered without an error, " << total.skipped
            << " munmaps left alone (they split no mapping)\n";
  return total;
}

}  // namespace umem::test
