// Adaptor: enforces byte limits on what an upstream source may hand out, per NUMA node and in
// total, before the kernel runs out (like RMM's limiting_resource_adaptor). Exceeding a limit is
// errc::out_of_memory, so the caching pool above trims its cache and retries once, exactly as
// for a real exhaustion. The growth of a growable segment (segment.hpp) is charged exactly like a
// new segment of the grown size: a growth past a limit throws out_of_memory before the upstream
// is asked, a refused growth (false) charges nothing, and deallocate() gives back the grown size.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>

#include "umem/allocator/source/segment.hpp"
#include "umem/allocator/fork_safety.hpp"

namespace umem::alloc {

struct byte_limits {
  std::optional<std::uint64_t> total;
  std::map<int, std::uint64_t> per_node;  // OS NUMA node -> bytes
  bool operator==(const byte_limits&) const = default;
};

class limiting_source final : public upstream_source {
 public:
  limiting_source(upstream_source& upstream, byte_limits limits)
      : upstream_(upstream), limits_(std::move(limits)) {}

  segment allocate(std::size_t bytes, const node_binding& where, coherence kind) override;
  segment allocate_growable(std::size_t bytes, std::size_t reserve_bytes,
                            const node_binding& where, coherence kind) override;
  bool grow(segment& s, std::size_t extra_bytes) override;
  bool decommit(const segment& s, void* p, std::size_t bytes) override;
  void recommit(const segment& s, void* p, std::size_t bytes) override;
  void deallocate(const segment& s) noexcept override;
  std::string describe() const override;

  std::uint64_t reserved_total() const;
  std::uint64_t reserved_on(int node) const;

 private:
  // Interleaved and preferred segments are charged to every node they may land on, divided
  // evenly: the exact split is only known after first touch (residency tells it).
  std::map<int, std::uint64_t> charge(std::size_t bytes, const node_binding& where) const;
  // Per-node change of the charge when a segment of `before` bytes becomes `after` bytes.
  std::map<int, std::int64_t> change_of(std::size_t before, std::size_t after,
                                        const node_binding& where) const;
  // Checks the limits for a segment growing from `before` to `after` bytes and charges the
  // difference (throws out_of_memory naming the limit).
  void take(std::size_t before, std::size_t after, const node_binding& where);
  // Charges the change from `before` to `after` bytes (either way) without a check.
  void apply(std::size_t before, std::size_t after, const node_binding& where) noexcept;

  upstream_source& upstream_;
  const byte_limits limits_;
  mutable std::mutex mutex_;
  std::shared_ptr<void> fork_ = lock_around_fork(mutex_, fork_rank::source);  // Note [Fork]
  std::uint64_t total_ = 0;
  std::map<int, std::uint64_t> per_node_;
};

}  // namespace umem::alloc
