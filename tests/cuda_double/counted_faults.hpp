// The runtime doubles' counting fault switch (cuda_double.cpp; rocr_double/double_state.cpp):
// every call of a fault-able entry point that gets past its argument checks is counted, and the
// Nth counted call since arm() fails with the runtime's out-of-memory status, once or, when
// `persistent`, together with every later one (memory that stays exhausted). The double's state
// mutex guards it; not thread-safe on its own.
#pragma once

#include <cstddef>
#include <map>
#include <mutex>
#include <string>

namespace umem::test_doubles {

class counted_faults {
 public:
  // Counting starts again from 0; `fail_at` 0 only counts.
  void arm(std::size_t fail_at, bool persistent) {
    *this = counted_faults{};
    fail_at_ = fail_at;
    persistent_ = persistent;
  }
  // Counts a call of `entry` ("cuMemMap", "hsa_amd_memory_lock_to_pool"); true when it must fail.
  bool fails(const char* entry) {
    ++calls_;
    ++by_entry_[entry];
    if (fail_at_ == 0 || calls_ < fail_at_ || (calls_ > fail_at_ && !persistent_)) return false;
    if (injected_++ == 0) first_failed_ = entry;
    return true;
  }
  std::size_t calls() const { return calls_; }
  std::size_t injected() const { return injected_; }
  // The entry point of the first failed call, "" before any.
  const std::string& first_failed() const { return first_failed_; }
  // "cuMemCreate=12 cuMemMap=12": the counted calls of each entry point, by name.
  std::string by_entry() const {
    std::string out;
    for (const auto& [entry, n] : by_entry_)
      out += (out.empty() ? "" : " ") + entry + "=" + std::to_string(n);
    return out;
  }

 private:
  std::size_t fail_at_ = 0;
  bool persistent_ = false;
  std::size_t calls_ = 0;
  std::size_t injected_ = 0;
  std::string first_failed_;
  std::map<std::string, std::size_t> by_entry_;
};

// What `text(faults)` says, taken under `mu` and kept in `copy`: a C string for a double's
// control, valid until the next call with the same `copy`.
template <class Text>
const char* text_of(std::mutex& mu, const counted_faults& faults, std::string& copy, Text text) {
  const std::lock_guard lock(mu);
  copy = text(faults);
  return copy.c_str();
}

}  // namespace umem::test_doubles
