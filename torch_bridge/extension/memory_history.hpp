// The memory history of umem's blocks, for umem_cuda_allocator.cpp.
//
// Note [Memory history]
// torch.cuda.memory._record_memory_history asks the allocator for a trace of its calls (alloc,
// free, out of memory), each with the stack the context recorder PyTorch passes gathers, and for
// the stack of each live block in snapshots. PyTorch's own allocator keeps both for the private
// pools it serves; this keeps them for umem's blocks, as the same TraceEntry and BlockInfo, so
// _dump_snapshot and PyTorch's memory visualizer show every block. The rules are PyTorch's
// (RecordContext: STATE keeps the stacks of live blocks, ALLOC adds them to alloc entries, ALL to
// free entries too; a ring of max_entries per device; skip_actions). Two differences: a free is
// "free_completed" when it is requested, since the block may then serve its stream again (umem
// hands it to other streams later, unseen here); and umem's segments are its pools', shared by
// all its blocks, so no segment_* entries are written. Releases before skip_actions existed pass
// none (Note [PyTorch releases] in torch_compat.hpp).
#pragma once

#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/util/ApproximateClock.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "torch_compat.hpp"

namespace umem_extension {

// The trace actions umem records, by the names _record_memory_history's skip_actions uses
// (PyTorch's parseTraceEntryAction, which 2.6 does not have); other names concern PyTorch's own
// segments and are left to PyTorch's allocator.
inline std::vector<trace_entry::Action> actions_named(const std::vector<std::string>& names) {
  std::vector<trace_entry::Action> out;
  for (const std::string& n : names) {
    if (n == "alloc") out.push_back(trace_entry::ALLOC);
    if (n == "free_requested") out.push_back(trace_entry::FREE_REQUESTED);
    if (n == "free_completed") out.push_back(trace_entry::FREE_COMPLETED);
    if (n == "oom") out.push_back(trace_entry::OOM);
  }
  return out;
}

class memory_history {
 public:
  void configure(bool enabled, cca::CreateContextFn recorder, std::size_t max_entries,
                 cca::RecordContext when, bool clear,
                 const std::vector<std::string>& skip_actions) {
    std::lock_guard lock(mutex_);
    recorder_ = enabled ? recorder : nullptr;
    when_ = enabled ? when : cca::RecordContext::NEVER;
    max_entries_ = std::max<std::size_t>(max_entries, 1);
    skip_ = actions_named(skip_actions);
    if (clear) {
      traces_.clear();
      live_.clear();
      tracked_.store(0, std::memory_order_release);
    }
    enabled_.store(enabled, std::memory_order_release);
  }

  bool enabled() const { return enabled_.load(std::memory_order_acquire); }

  void allocated(c10::DeviceIndex device, void* p, std::size_t size, void* stream) {
    if (!enabled()) return;
    const std::shared_ptr<c10::GatheredContext> context = gather(cca::RecordContext::STATE);
    std::lock_guard lock(mutex_);
    live_[p] = block{device, size, stream, context};
    tracked_.store(live_.size(), std::memory_order_release);
    record(trace_entry::ALLOC, device, reinterpret_cast<std::size_t>(p), size, stream,
           when_ >= cca::RecordContext::ALLOC ? context : nullptr);
  }

  void freed(void* p) {
    // The stacks of blocks allocated while recording are dropped when they are freed, even after
    // the recording stopped (snapshots show them until then, as PyTorch's do).
    if (tracked_.load(std::memory_order_acquire) == 0) return;
    const std::shared_ptr<c10::GatheredContext> context = gather(cca::RecordContext::ALL);
    std::lock_guard lock(mutex_);
    auto it = live_.find(p);
    if (it == live_.end()) return;  // allocated before the history was enabled
    const block b = std::move(it->second);
    live_.erase(it);
    tracked_.store(live_.size(), std::memory_order_release);
    if (!enabled()) return;
    const auto addr = reinterpret_cast<std::size_t>(p);
    for (auto action : {trace_entry::FREE_REQUESTED, trace_entry::FREE_COMPLETED})
      record(action, b.device, addr, b.size, b.stream, context ? context : b.context);
  }

  void out_of_memory(c10::DeviceIndex device, std::size_t size, std::size_t free_bytes,
                     void* stream) {
    if (!enabled()) return;
    std::lock_guard lock(mutex_);
    record(trace_entry::OOM, device, free_bytes, size, stream, nullptr);
  }

  // The stack of the live block at `address`, when one was gathered.
  std::shared_ptr<c10::GatheredContext> context_of(std::size_t address) const {
    std::lock_guard lock(mutex_);
    auto it = live_.find(reinterpret_cast<void*>(address));
    return it == live_.end() ? nullptr : it->second.context;
  }

  // Appends the trace of each device to `traces` (one vector per device, as PyTorch's snapshot
  // has them), in time order with what is there already, times converted as PyTorch converts
  // its own.
  void add_traces(std::vector<std::vector<trace_entry>>& traces) {
    std::lock_guard lock(mutex_);
    if (traces_.empty()) return;
    auto to_unix = clock_.makeConverter();
    for (auto& [device, entries] : traces_) {
      const auto d = static_cast<std::size_t>(device);
      if (traces.size() <= d) traces.resize(d + 1);
      for (trace_entry e : entries) {
        e.time_.t_ = to_unix(e.time_.approx_t_);
        traces[d].push_back(std::move(e));
      }
      std::stable_sort(traces[d].begin(), traces[d].end(),
                       [](const trace_entry& a, const trace_entry& b) {
                         return a.time_.t_ < b.time_.t_;
                       });
    }
  }

 private:
  struct block {
    c10::DeviceIndex device = 0;
    std::size_t size = 0;
    void* stream = nullptr;
    std::shared_ptr<c10::GatheredContext> context;
  };

  std::shared_ptr<c10::GatheredContext> gather(cca::RecordContext level) {
    cca::CreateContextFn recorder = nullptr;
    {
      std::lock_guard lock(mutex_);
      if (when_ < level) return nullptr;
      recorder = recorder_;
    }
    return recorder ? recorder() : nullptr;  // outside the lock: it may take the GIL
  }

  // mutex_ held.
  void record(trace_entry::Action action, c10::DeviceIndex device, std::size_t addr,
              std::size_t size, void* stream, std::shared_ptr<c10::GatheredContext> context) {
    if (std::find(skip_.begin(), skip_.end(), action) != skip_.end()) return;
    auto& ring = traces_[device];
    if (ring.size() >= max_entries_) ring.pop_front();
    ring.push_back(make_trace_entry(action, device, addr, size, stream, c10::getApproximateTime(),
                                    std::move(context)));
  }

  std::atomic<bool> enabled_{false};
  std::atomic<std::size_t> tracked_{0};  // live_.size(), read without the lock
  mutable std::mutex mutex_;
  cca::CreateContextFn recorder_ = nullptr;
  cca::RecordContext when_ = cca::RecordContext::NEVER;
  std::size_t max_entries_ = 1;
  std::vector<trace_entry::Action> skip_;
  std::unordered_map<void*, block> live_;
  std::unordered_map<c10::DeviceIndex, std::deque<trace_entry>> traces_;
  c10::ApproximateClockToUnixTimeConverter clock_;
};

}  // namespace umem_extension
