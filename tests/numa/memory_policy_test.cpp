// memory_policy: the mode names, the node range checked before the kernel is asked, a policy set
// on a thread of its own (so it ends with that thread) as the kernel then reports it, and a node's
// free and total memory as libnuma reports it.
#include <gtest/gtest.h>
#include <numaif.h>

#include <string>
#include <thread>

#include "umem/core/error.hpp"
#include "umem/numa/memory_policy.hpp"

namespace umem::numa {
namespace {

std::string message_of(auto f) {
  try {
    f();
  } catch (const umem::error& e) {
    EXPECT_EQ(e.code(), errc::invalid_argument);
    return e.what();
  }
  ADD_FAILURE() << "no umem::error";
  return {};
}

TEST(memory_policy, parses_bind_and_preferred_and_names_any_other_mode) {
  EXPECT_EQ(parse_policy_mode("bind"), policy_mode::bind);
  EXPECT_EQ(parse_policy_mode("preferred"), policy_mode::preferred);
  EXPECT_NE(message_of([] { parse_policy_mode("interleave"); })
                .find("memory policy mode 'interleave' is not one of bind, preferred"),
            std::string::npos);
}

TEST(memory_policy, refuses_a_node_outside_the_mask_before_asking_the_kernel) {
  EXPECT_NE(message_of([] { set_thread_memory_policy(-1, policy_mode::bind); })
                .find("memory policy: NUMA node -1 is out of range"),
            std::string::npos);
  EXPECT_NE(message_of([] { set_thread_memory_policy(1024, policy_mode::preferred); })
                .find("memory policy: NUMA node 1024 is out of range"),
            std::string::npos);
}

TEST(memory_policy, sets_the_calling_threads_policy_to_the_node) {
  for (const auto mode : {policy_mode::bind, policy_mode::preferred}) {
    std::thread([mode] {
      set_thread_memory_policy(0, mode);  // node 0 exists wherever Linux runs
      int policy = -1;
      unsigned long mask = 0;
      ASSERT_EQ(get_mempolicy(&policy, &mask, 8 * sizeof mask, nullptr, 0), 0);
      EXPECT_EQ(policy, mode == policy_mode::bind ? MPOL_BIND : MPOL_PREFERRED);
      EXPECT_EQ(mask, 1UL);
    }).join();
  }
}

TEST(memory_policy, reports_node_zeros_memory_and_nothing_for_a_node_that_does_not_exist) {
  const auto node0 = node_free_and_total(0);
  ASSERT_TRUE(node0.has_value());
  EXPECT_GT(node0->second, 0U);
  EXPECT_LE(node0->first, node0->second);
  EXPECT_FALSE(node_free_and_total(4000).has_value());
}

}  // namespace
}  // namespace umem::numa
