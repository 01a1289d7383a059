// Test double of umem::alloc::upstream_source: plain aligned host memory (no mmap, no NUMA, no
// GPU), a settable capacity to simulate exhaustion, and a record of every call so tests can check
// what the pool asked for and that it returned exactly what it got. With set_growable() it also
// hands out growable segments (segment.hpp, Note [Growable segments]): the whole reservation is
// allocated up front, and grow() only moves the segment's end (checked against the capacity).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <map>
#include <mutex>
#include <set>
#include <string>

#include "umem/allocator/source/segment.hpp"
#include "umem/core/error.hpp"

namespace umem::alloc::test {

class fake_upstream final : public upstream_source {
 public:
  // Segments are aligned to `alignment` and their size rounded up to `granularity`.
  explicit fake_upstream(std::size_t capacity = 0, std::size_t granularity = 1,
                         std::size_t alignment = 65536)
      : capacity_(capacity), granularity_(granularity), alignment_(alignment) {}
  ~fake_upstream() override {
    for (const auto& [base, size] : live_) std::free(base);
  }
  fake_upstream(const fake_upstream&) = delete;
  fake_upstream& operator=(const fake_upstream&) = delete;

  segment allocate(std::size_t bytes, const node_binding& where, coherence kind) override {
    return hand_out(bytes, 0, where, kind);
  }

  segment allocate_growable(std::size_t bytes, std::size_t reserve_bytes,
                            const node_binding& where, coherence kind) override {
    std::size_t reserve = 0;
    {
      std::lock_guard lock(mutex_);
      ++allocate_growable_calls_;
      reserve = std::min(reserve_bytes, max_reserve_);
    }
    return hand_out(bytes, reserve, where, kind);
  }

  bool grow(segment& s, std::size_t extra_bytes) override {
    std::lock_guard lock(mutex_);
    ++grow_calls_;
    const auto it = live_.find(s.base);
    if (it == live_.end() || it->second != s.size) {
      ++bad_grows_;
      return false;
    }
    const std::size_t extra = (extra_bytes + granularity_ - 1) / granularity_ * granularity_;
    if (s.reserved_size < s.size || extra > s.reserved_size - s.size) return false;
    if (capacity_ != 0 && outstanding_ + extra > capacity_) {
      ++failed_calls_;
      throw error(errc::out_of_memory, "fake_upstream: growth by " + std::to_string(extra) +
                                           " bytes, " + std::to_string(capacity_ - outstanding_) +
                                           " left");
    }
    it->second += extra;
    outstanding_ += extra;
    s.size += extra;
    ++grown_calls_;
    return true;
  }

  // With set_decommit(true): records the bytes given back (the memory is not touched); else
  // answers false, like a source with pinned memory.
  bool decommit(const segment& s, void* p, std::size_t bytes) override {
    std::lock_guard lock(mutex_);
    ++decommit_calls_;
    if (!decommit_ || keeps_pages_.count(s.base) != 0) return false;
    const auto it = live_.find(s.base);
    const auto* first = static_cast<const unsigned char*>(s.base);
    const auto* at = static_cast<const unsigned char*>(p);
    if (it == live_.end() || at < first || at + bytes > first + it->second) ++bad_decommits_;
    decommitted_bytes_ += bytes;
    return true;
  }

  // Records the bytes taken back; with fail_recommits(n) the next n calls throw out_of_memory.
  void recommit(const segment& s, void* p, std::size_t bytes) override {
    std::lock_guard lock(mutex_);
    ++recommit_calls_;
    if (failing_recommits_ != 0) {
      --failing_recommits_;
      throw error(errc::out_of_memory, "fake_upstream: recommit of " + std::to_string(bytes) +
                                           " bytes refused");
    }
    const auto it = live_.find(s.base);
    const auto* first = static_cast<const unsigned char*>(s.base);
    const auto* at = static_cast<const unsigned char*>(p);
    if (it == live_.end() || at < first || at + bytes > first + it->second) ++bad_decommits_;
    recommitted_bytes_ += bytes;
  }

  void deallocate(const segment& s) noexcept override {
    std::lock_guard lock(mutex_);
    ++deallocate_calls_;
    const auto it = live_.find(s.base);
    if (it == live_.end() || it->second != s.size) {
      ++bad_deallocates_;  // never handed out, already returned, or returned with another size
      return;
    }
    outstanding_ -= it->second;
    std::free(it->first);
    live_.erase(it);
  }

  std::string describe() const override { return "fake upstream (aligned host memory)"; }

  // Growable segments reserve at most `max_reserve` bytes (0: none, the default: allocate_growable
  // is allocate and grow() answers false, like a source that cannot grow).
  void set_growable(std::size_t max_reserve) {
    std::lock_guard lock(mutex_);
    max_reserve_ = max_reserve;
  }
  std::size_t allocate_growable_calls() const { return read(allocate_growable_calls_); }
  std::size_t grow_calls() const { return read(grow_calls_); }
  std::size_t grown_calls() const { return read(grown_calls_); }
  std::size_t bad_grows() const { return read(bad_grows_); }
  // decommit() of the segment at `base` answers false, as for a plain device allocation.
  void keep_pages_of(void* base) {
    std::lock_guard lock(mutex_);
    keeps_pages_.insert(base);
  }
  void set_decommit(bool on) {
    std::lock_guard lock(mutex_);
    decommit_ = on;
  }
  std::size_t decommit_calls() const { return read(decommit_calls_); }
  std::size_t decommitted_bytes() const { return read(decommitted_bytes_); }
  std::size_t bad_decommits() const { return read(bad_decommits_); }  // or recommits
  std::size_t recommit_calls() const { return read(recommit_calls_); }
  std::size_t recommitted_bytes() const { return read(recommitted_bytes_); }
  void fail_recommits(std::size_t n) {
    std::lock_guard lock(mutex_);
    failing_recommits_ = n;
  }

  void set_capacity(std::size_t bytes) {
    std::lock_guard lock(mutex_);
    capacity_ = bytes;
  }
  std::size_t allocate_calls() const { return read(allocate_calls_); }
  std::size_t deallocate_calls() const { return read(deallocate_calls_); }
  std::size_t failed_calls() const { return read(failed_calls_); }
  std::size_t bad_deallocates() const { return read(bad_deallocates_); }
  std::size_t outstanding_bytes() const { return read(outstanding_); }
  std::size_t outstanding_segments() const {
    std::lock_guard lock(mutex_);
    return live_.size();
  }
  node_binding last_binding() const {
    std::lock_guard lock(mutex_);
    return last_binding_;
  }
  coherence last_kind() const {
    std::lock_guard lock(mutex_);
    return last_kind_;
  }

 private:
  // A segment of `bytes` (rounded to the granularity); growable up to `reserve` when that is
  // larger. The whole reservation is host memory from the start (untouched pages cost nothing),
  // but only the segment's size counts as outstanding.
  segment hand_out(std::size_t bytes, std::size_t reserve, const node_binding& where,
                   coherence kind) {
    std::lock_guard lock(mutex_);
    ++allocate_calls_;
    last_binding_ = where;
    last_kind_ = kind;
    const std::size_t size = (bytes + granularity_ - 1) / granularity_ * granularity_;
    if (reserve <= size) reserve = 0;
    if (capacity_ != 0 && outstanding_ + size > capacity_) {
      ++failed_calls_;
      throw error(errc::out_of_memory, "fake_upstream: " + std::to_string(size) +
                                           " bytes requested, " +
                                           std::to_string(capacity_ - outstanding_) + " left");
    }
    // aligned_alloc wants a multiple of the alignment.
    const std::size_t span = std::max(size, reserve);
    void* p = std::aligned_alloc(alignment_, (span + alignment_ - 1) / alignment_ * alignment_);
    if (!p) throw error(errc::out_of_memory, "fake_upstream: host malloc failed");
    live_[p] = size;
    outstanding_ += size;
    return segment{p, size, where, kind, false, reserve};
  }

  std::size_t read(const std::size_t& v) const {
    std::lock_guard lock(mutex_);
    return v;
  }

  mutable std::mutex mutex_;
  std::size_t capacity_;  // 0 = unlimited
  std::size_t granularity_;
  std::size_t alignment_;
  std::map<void*, std::size_t> live_;
  std::size_t outstanding_ = 0;
  std::size_t allocate_calls_ = 0;
  std::size_t deallocate_calls_ = 0;
  std::size_t failed_calls_ = 0;
  std::size_t bad_deallocates_ = 0;
  std::size_t max_reserve_ = 0;
  std::size_t allocate_growable_calls_ = 0;
  std::size_t grow_calls_ = 0;   // every call
  std::size_t grown_calls_ = 0;  // calls that grew
  std::size_t bad_grows_ = 0;    // of a segment not handed out, or with another size
  bool decommit_ = false;
  std::set<void*> keeps_pages_;
  std::size_t decommit_calls_ = 0;
  std::size_t decommitted_bytes_ = 0;
  std::size_t bad_decommits_ = 0;  // outside a live segment
  std::size_t recommit_calls_ = 0;
  std::size_t recommitted_bytes_ = 0;
  std::size_t failing_recommits_ = 0;
  node_binding last_binding_;
  coherence last_kind_ = coherence::unknown;
};

}  // namespace umem::alloc::test
