// A check shared by the weights tests: a call that must fail with invalid_argument.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "umem/core/error.hpp"

namespace umem::weights {

// `f()` throws umem::error(invalid_argument) whose message holds `part`.
template <class F>
void expect_invalid(F&& f, const std::string& part) {
  try {
    f();
    ADD_FAILURE() << "no error, expected one saying " << part;
  } catch (const umem::error& e) {
    EXPECT_EQ(e.code(), errc::invalid_argument) << e.what();
    EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
  }
}

}  // namespace umem::weights
