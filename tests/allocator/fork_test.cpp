// fork() while other threads allocate (Note [Fork] in fork_safety.hpp): every child allocates,
// frees (also a block it inherited), trims, reads statistics and exits; the parent keeps serving.
// Through the allocator and through the C ABI's default allocator. A child that hangs is ended
// by SIGALRM and counted as failed; after 3 failures no more children are made (a regression
// fails in seconds instead of hanging for every fork).
//
// Note [Forks under a sanitizer]
// GCC 12's AddressSanitizer and ThreadSanitizer do not lock their own malloc around fork() (LLVM
// added that in 2023 and 2024, llvm-project pull requests 75290 and 96600), so a child whose
// parent had a thread inside malloc at the fork hangs in the sanitizer's allocator at its first
// malloc, whatever umem does (seen in CI: the child waits in SizeClassAllocator64's mutex, called
// from std::string in memory_stats()). Built with either, the threads therefore stop between two
// iterations for each fork: outside every umem and sanitizer lock, their thread caches still
// full, so the child still inherits other threads' caches and the sanitizer checks its every use
// of them; the forks in the middle of a thread's allocation are the plain build's.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "umem/allocator/allocator.hpp"
#include "umem/umem.h"

namespace umem::alloc {
namespace {

constexpr int kForks = 200;

// What became of a child that did not exit with 0, for the failure message.
std::string what_became_of(int status) {
  if (WIFEXITED(status)) {
    return WEXITSTATUS(status) == 3 ? "exited 3 (its check failed: wrong memory or no memory)"
                                    : "exited " + std::to_string(WEXITSTATUS(status));
  }
  if (WIFSIGNALED(status)) {
    return WTERMSIG(status) == SIGALRM ? "hung (ended by SIGALRM after 10 s)"
                                       : "killed by signal " + std::to_string(WTERMSIG(status));
  }
  return "status " + std::to_string(status);
}

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kStopThreadsForEachFork = true;  // Note [Forks under a sanitizer]
#else
constexpr bool kStopThreadsForEachFork = false;
#endif

// What the churning threads ask between two iterations: whether to go on, waiting first while
// the forking thread has them stopped (only where kStopThreadsForEachFork).
class churn_gate {
 public:
  bool keep_going() {
    if (stopping_.load(std::memory_order_acquire)) {
      stopped_.fetch_add(1, std::memory_order_acq_rel);
      while (stopping_.load(std::memory_order_acquire)) std::this_thread::yield();
      stopped_.fetch_sub(1, std::memory_order_acq_rel);
    }
    return !done_.load(std::memory_order_acquire);
  }
  void stop_threads(int threads) {
    stopping_ = true;
    while (stopped_.load(std::memory_order_acquire) != threads) std::this_thread::yield();
  }
  // Returns once every thread has left its wait, so a thread still counted as stopped at the
  // next stop_threads() is one that really waits.
  void resume_threads() {
    stopping_ = false;
    while (stopped_.load(std::memory_order_acquire) != 0) std::this_thread::yield();
  }
  void finish() { done_ = true; }

 private:
  std::atomic<bool> done_{false};
  std::atomic<bool> stopping_{false};
  std::atomic<int> stopped_{0};
};

// Runs `churn(thread index, gate)` on 2 threads while forking up to kForks children that each
// run `child` (true: success) under a 10 s alarm; what became of the children that did not exit
// with 0, one line each (empty: all did).
std::string forks_while_threads_allocate(const std::function<void(int, churn_gate&)>& churn,
                                         const std::function<bool()>& child) {
  constexpr int kThreads = 2;
  churn_gate gate;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) threads.emplace_back([&, t] { churn(t, gate); });
  int failed = 0;
  std::string failures;
  for (int i = 0; i < kForks && failed < 3; ++i) {
    if (kStopThreadsForEachFork) gate.stop_threads(kThreads);
    const pid_t pid = ::fork();
    const int fork_errno = errno;
    if (kStopThreadsForEachFork && pid != 0) gate.resume_threads();
    if (pid < 0) {
      ++failed;
      failures += "fork " + std::to_string(i) + ": fork() failed: " + std::strerror(fork_errno);
      failures += "\n";
      continue;
    }
    if (pid == 0) {
      ::alarm(10);
      ::_exit(child() ? 0 : 3);
    }
    int status = 0;
    if (::waitpid(pid, &status, 0) != pid) {
      const int wait_errno = errno;
      ++failed;
      failures += "fork " + std::to_string(i) + ": waitpid failed: " + std::strerror(wait_errno);
      failures += "\n";
    } else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      ++failed;
      failures += "fork " + std::to_string(i) + ": " + what_became_of(status) + "\n";
    }
  }
  gate.finish();
  for (auto& t : threads) t.join();
  return failures;
}

bool filled_with(const void* p, std::size_t n, unsigned char v) {
  const auto* b = static_cast<const unsigned char*>(p);
  return b[0] == v && b[n / 2] == v && b[n - 1] == v;
}

TEST(fork, children_of_an_allocator_whose_threads_allocate_allocate_free_and_exit) {
  allocator a(alloc_options{});
  void* inherited = a.allocate(1 << 20);
  std::memset(inherited, 7, 1 << 20);
  const std::string failed = forks_while_threads_allocate(
      [&](int t, churn_gate& gate) {
        for (std::size_t n = 0; gate.keep_going(); ++n) {
          void* small = a.allocate(4096 + static_cast<std::size_t>(t));
          void* large = a.allocate((std::size_t{3} << 20) + static_cast<std::size_t>(t));
          a.deallocate(small);
          a.deallocate(large);
          if (n % 64 == 0) {
            (void)a.trim();
            (void)a.memory_stats();
          }
        }
      },
      [&] {
        bool ok = filled_with(inherited, 1 << 20, 7);
        void* x = a.allocate(1 << 20);
        void* y = a.allocate(std::size_t{5} << 20);
        std::memset(x, 1, 1 << 20);
        std::memset(y, 2, std::size_t{5} << 20);
        ok = ok && filled_with(x, 1 << 20, 1) && filled_with(y, std::size_t{5} << 20, 2);
        a.deallocate(x);
        a.deallocate(y);
        a.deallocate(inherited);
        (void)a.trim();
        (void)a.memory_stats();  // every pool's statistics, under their locks
        return ok;
      });
  EXPECT_EQ(failed, "") << "children that failed or hung, of " << kForks;
  EXPECT_TRUE(filled_with(inherited, 1 << 20, 7)) << "the parent's memory is its own";
  a.deallocate(inherited);
  EXPECT_EQ(a.memory_stats().at("allocated_bytes.all.current"), 0);
}

TEST(fork, children_of_a_c_abi_user_whose_threads_allocate_allocate_free_and_exit) {
  void* inherited = umem_alloc(1 << 20);
  ASSERT_NE(inherited, nullptr);
  std::memset(inherited, 9, 1 << 20);
  const std::string failed = forks_while_threads_allocate(
      [](int t, churn_gate& gate) {
        while (gate.keep_going()) {
          void* p = umem_alloc((std::size_t{2} << 20) + static_cast<std::size_t>(t));
          void* q = umem_alloc(100);
          umem_free(p);
          umem_free(q);
        }
      },
      [&] {
        void* p = umem_alloc(std::size_t{8} << 20);
        if (p == nullptr) return false;
        std::memset(p, 3, std::size_t{8} << 20);
        umem_free(p);
        umem_free(inherited);
        return true;
      });
  EXPECT_EQ(failed, "") << "children that failed or hung, of " << kForks;
  EXPECT_TRUE(filled_with(inherited, 1 << 20, 9));
  umem_free(inherited);
}

}  // namespace
}  // namespace umem::alloc
