// Checks that every live block's bytes stay intact while it is live, and that no two live
// blocks overlap.
//
// Note [What is written]
// At allocation a pattern that depends on the block's id, the pass and the byte's address is
// written to the block's first 64 bytes, its last 64 bytes, and 8 bytes at every multiple of
// `stride` of address inside it; at free those bytes are compared. Writing every byte would back
// the whole 15 GB of a GPT-2 trace; at a 64 KiB stride only one 4 KiB page in 16 is touched.
// Overlaps are also checked exactly, on every allocation, against an interval map of the live
// blocks, so a pool handing out one range twice is caught even where no pattern bytes meet.
//
// Not thread-safe. The blocks must be writable host memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace umem::trace_replay {

class integrity_checker {
 public:
  // `ids`: the number of distinct block ids (they are dense); `stride` >= 8, power of two.
  integrity_checker(std::size_t ids, std::size_t stride);

  // A new pass: patterns differ from the last pass's, so stale bytes never verify.
  void begin_pass(std::uint32_t pass) { pass_ = pass; }
  // Records block `id` at [p, p + size), counts an overlap with a live block, writes the pattern.
  void on_alloc(std::int64_t id, void* p, std::size_t size, std::uint32_t line);
  // Verifies block `id`'s pattern and forgets the block. Returns its address.
  void* on_free(std::int64_t id, std::uint32_t line);

  std::size_t failures() const { return failures_; }
  std::size_t blocks_checked() const { return checked_; }
  std::size_t stride() const { return stride_; }
  // The first few failures, each naming the block, its trace line and what was wrong.
  const std::vector<std::string>& messages() const { return messages_; }

 private:
  struct live_block {
    std::uintptr_t end;
    std::int64_t id;
  };
  template <class Visit>
  void for_each_sampled_byte(std::uintptr_t begin, std::size_t size, Visit&& visit) const;
  unsigned char expected(std::int64_t id, std::uintptr_t address) const;
  void fail(const std::string& message);

  std::size_t stride_;
  std::uint32_t pass_ = 0;
  std::vector<std::uintptr_t> address_;  // by id; 0 = not live
  std::vector<std::size_t> size_;        // by id
  std::map<std::uintptr_t, live_block> live_;  // by start address
  std::size_t failures_ = 0;
  std::size_t checked_ = 0;
  std::vector<std::string> messages_;
};

}  // namespace umem::trace_replay
