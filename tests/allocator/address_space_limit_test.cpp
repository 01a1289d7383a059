// A process under an address-space limit (RLIMIT_AS: `ulimit -v`, as some batch systems set it)
// still gets its memory: the growable segments' reservations shrink to what the limit allows
// (host_numa_source.cpp). Each test lowers the soft limit to the address space in use plus a
// margin, and restores it.
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <string>

#include "umem/allocator/allocator.hpp"
#include "umem/allocator/source/host_numa_source.hpp"
#include "umem/core/error.hpp"

namespace {

using umem::alloc::host_numa_source;
using umem::alloc::segment;

constexpr std::size_t MiB = std::size_t{1} << 20;
constexpr std::size_t GiB = std::size_t{1} << 30;

// VmSize of /proc/self/status, in bytes: the address space the limit is checked against.
std::size_t address_space_in_use() {
  std::ifstream status("/proc/self/status");
  std::string key;
  std::size_t kib = 0;
  while (status >> key) {
    if (key == "VmSize:") {
      status >> kib;
      return kib * 1024;
    }
  }
  ADD_FAILURE() << "no VmSize in /proc/self/status";
  return 0;
}

// Lowers RLIMIT_AS's soft limit to what is in use plus `margin` for the guard's life.
class address_space_limit {
 public:
  explicit address_space_limit(std::size_t margin) {
    EXPECT_EQ(getrlimit(RLIMIT_AS, &saved_), 0);
    rlimit lowered = saved_;
    lowered.rlim_cur = address_space_in_use() + margin;
    EXPECT_EQ(setrlimit(RLIMIT_AS, &lowered), 0);
  }
  ~address_space_limit() { setrlimit(RLIMIT_AS, &saved_); }
  address_space_limit(const address_space_limit&) = delete;
  address_space_limit& operator=(const address_space_limit&) = delete;

 private:
  rlimit saved_{};
};

TEST(address_space_limit, a_refused_reservation_shrinks_and_the_segment_still_grows_in_place) {
  host_numa_source src;
  segment s;
  {
    address_space_limit limit(1 * GiB);
    s = src.allocate_growable(2 * MiB, 256 * GiB, {umem::alloc::bind_mode::bind, {0}},
                              umem::coherence::fine);
    // 256 GiB halved until it fits under 1 GiB: 512 MiB unless the process's own maps took
    // some of the margin meanwhile.
    EXPECT_GT(s.reserved_size, s.size);
    EXPECT_LE(s.reserved_size, 512 * MiB);
    EXPECT_GE(s.reserved_size, 256 * MiB);
    ASSERT_TRUE(src.grow(s, 4 * MiB));
  }
  EXPECT_EQ(s.size, 6 * MiB);
  std::memset(s.base, 0x5a, s.size);  // first part and growth are usable memory
  src.deallocate(s);
}

TEST(address_space_limit, no_room_for_any_reservation_gives_a_plain_segment) {
  host_numa_source src;
  address_space_limit limit(8 * MiB);  // 2 MiB + its alignment fit, 4 MiB + 2 MiB may not
  const segment s = src.allocate_growable(2 * MiB, 256 * GiB, {umem::alloc::bind_mode::bind, {0}},
                                          umem::coherence::fine);
  EXPECT_EQ(s.size, 2 * MiB);
  EXPECT_LE(s.reserved_size, 4 * MiB);  // 0 (plain) or the one 4 MiB reservation that fitted
  src.deallocate(s);
}

TEST(address_space_limit, an_allocation_larger_than_the_limit_allows_is_out_of_memory) {
  host_numa_source src;
  address_space_limit limit(64 * MiB);
  try {
    (void)src.allocate_growable(128 * MiB, 256 * GiB, {umem::alloc::bind_mode::bind, {0}},
                                umem::coherence::fine);
    ADD_FAILURE() << "no error";
  } catch (const umem::error& e) {
    EXPECT_EQ(e.code(), umem::errc::out_of_memory) << e.what();
    // The plain mapping's error, not a reservation's: 128 MiB and its 2 MiB alignment.
    EXPECT_NE(std::string(e.what()).find("mmap(len=136314880, PROT_READ|PROT_WRITE"),
              std::string::npos)
        << e.what();
  }
}

TEST(address_space_limit, the_allocator_serves_a_request_under_a_limit_below_its_reservation) {
  umem::alloc::allocator a(umem::alloc::alloc_options{});
  address_space_limit limit(2 * GiB);
  auto* p = static_cast<unsigned char*>(a.allocate(16 * MiB));
  std::memset(p, 0xab, 16 * MiB);
  a.deallocate(p);
}

}  // namespace
