// examples/verdict.hpp — how the extending examples end: the line ctest looks for on stdout
// and status 0, or what went wrong on stderr and status 1.
#pragma once

#include <iostream>
#include <string_view>

inline int verdict(bool ok, std::string_view passed, std::string_view failed) {
  (ok ? std::cout : std::cerr) << (ok ? passed : failed) << "\n";
  return ok ? 0 : 1;
}
