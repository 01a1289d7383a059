// A lock for critical sections of a few dozen nanoseconds taken by several threads at once.
// Internal (detail/).
//
// Note [Spin lock]
// glibc's pthread mutex (std::mutex) puts a thread that finds it held to sleep in the kernel
// (futex) at once, and its holder wakes it with a second system call: microseconds per meeting,
// which is most of the time of an operation whose work under the lock takes tens of nanoseconds.
// This lock spins instead, reading the flag (a shared cache line, not a write per spin) with the
// CPU's spin-wait hint between reads; after `spins_before_yield` reads it yields the CPU each time,
// since the holder may have been preempted (more threads than cores). Use it only where the code
// under it never blocks, allocates rarely and calls nothing that might take it again.
// Meets the standard's Lockable requirements (std::lock_guard, std::unique_lock).
#pragma once

#include <atomic>
#include <thread>

namespace umem::detail {

class spin_lock {
 public:
  void lock() noexcept {
    unsigned spins = 0;
    while (held_.exchange(true, std::memory_order_acquire))
      while (held_.load(std::memory_order_relaxed)) {
        if (++spins < spins_before_yield) {
          relax();
        } else {
          std::this_thread::yield();
        }
      }
  }
  bool try_lock() noexcept {
    return !held_.load(std::memory_order_relaxed) &&
           !held_.exchange(true, std::memory_order_acquire);
  }
  void unlock() noexcept { held_.store(false, std::memory_order_release); }

 private:
  static constexpr unsigned spins_before_yield = 128;

  static void relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    asm volatile("yield" ::: "memory");
#endif
  }

  std::atomic<bool> held_{false};
};

}  // namespace umem::detail
