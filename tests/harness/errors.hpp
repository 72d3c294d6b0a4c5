// Helpers for asserting on error messages in tests.
#pragma once

#include <doctest/doctest.h>

#include <string>

#include "flaxpp/core/error.hpp"

namespace flaxpp::testing {

// Whether `text` contains `part`.
inline bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// The message of the ParseError that `f` throws (the test fails when it throws nothing).
template <class F>
std::string parse_error_of(F&& f) {
  try {
    f();
  } catch (const ParseError& e) {
    return e.what();
  }
  FAIL("expected a flaxpp::ParseError, nothing was thrown");
  return {};
}

}  // namespace flaxpp::testing
