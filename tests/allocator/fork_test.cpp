// fork() while other threads allocate (Note [Fork] in fork_safety.hpp): every child allocates,
// frees (also a block it inherited), trims, reads statistics and exits; the parent keeps serving.
// Through the allocator and through the C ABI's default allocator. A child that hangs is ended
// by SIGALRM and counted as failed; after 3 failures no more children are made (a regression
// fails in seconds instead of hanging for every fork).
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <functional>
#include <thread>
#include <vector>

#include "umem/allocator/allocator.hpp"
#include "umem/umem.h"

namespace umem::alloc {
namespace {

constexpr int kForks = 200;

// Runs `churn(thread index, stop)` on 2 threads while forking up to kForks children that each
// run `child` (true: success) under a 10 s alarm; the number of children that did not exit
// with 0.
int forks_while_threads_allocate(const std::function<void(int, const std::atomic<bool>&)>& churn,
                                 const std::function<bool()>& child) {
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t) threads.emplace_back([&, t] { churn(t, stop); });
  int failed = 0;
  for (int i = 0; i < kForks && failed < 3; ++i) {
    const pid_t pid = ::fork();
    if (pid < 0) {
      ++failed;
      continue;
    }
    if (pid == 0) {
      ::alarm(10);
      ::_exit(child() ? 0 : 3);
    }
    int status = 0;
    if (::waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
      ++failed;
  }
  stop = true;
  for (auto& t : threads) t.join();
  return failed;
}

bool filled_with(const void* p, std::size_t n, unsigned char v) {
  const auto* b = static_cast<const unsigned char*>(p);
  return b[0] == v && b[n / 2] == v && b[n - 1] == v;
}

TEST(fork, children_of_an_allocator_whose_threads_allocate_allocate_free_and_exit) {
  allocator a(alloc_options{});
  void* inherited = a.allocate(1 << 20);
  std::memset(inherited, 7, 1 << 20);
  const int failed = forks_while_threads_allocate(
      [&](int t, const std::atomic<bool>& stop) {
        for (std::size_t n = 0; !stop; ++n) {
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
  EXPECT_EQ(failed, 0) << "children that failed or hung, of " << kForks;
  EXPECT_TRUE(filled_with(inherited, 1 << 20, 7)) << "the parent's memory is its own";
  a.deallocate(inherited);
  EXPECT_EQ(a.memory_stats().at("allocated_bytes.all.current"), 0);
}

TEST(fork, children_of_a_c_abi_user_whose_threads_allocate_allocate_free_and_exit) {
  void* inherited = umem_alloc(1 << 20);
  ASSERT_NE(inherited, nullptr);
  std::memset(inherited, 9, 1 << 20);
  const int failed = forks_while_threads_allocate(
      [](int t, const std::atomic<bool>& stop) {
        while (!stop) {
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
  EXPECT_EQ(failed, 0) << "children that failed or hung, of " << kForks;
  EXPECT_TRUE(filled_with(inherited, 1 << 20, 9));
  umem_free(inherited);
}

}  // namespace
}  // namespace umem::alloc
