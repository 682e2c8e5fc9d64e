#pragma once
// The message of the exception a piece of test code throws, for matching it with Catch's string
// matchers while still requiring its type (CHECK_THROWS_WITH alone accepts any type).

#include <string>

#include <catch2/catch.hpp>

namespace testing_support {

/// The message of the E that `f` throws; fails the test when it throws nothing.
template <class E, class F>
std::string message_of(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  }
  FAIL("expected an exception of the type asked for");
  return "";
}

}  // namespace testing_support
