// Command-line arguments of the `flaxpp` subcommands: a usage error type and the value of an
// option, checked and named by its flag (never a C++ conversion's message).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "flaxpp/core/error.hpp"

namespace flaxpp::cli {

// A command line the subcommand cannot run: main prints the message and the subcommand's
// usage line, and exits with 2.
class UsageError : public Error {
 public:
  using Error::Error;
};

// The value after option args[i] (advancing i past it); UsageError naming the flag when none
// follows.
const std::string& option_value(const std::vector<std::string>& args, std::size_t& i);

// `value` as a decimal integer in [min, max]; UsageError naming `flag`, the range and what came
// otherwise (no sign-less overflow, no trailing characters, no empty string).
std::int64_t parse_int_option(std::string_view flag, std::string_view value, std::int64_t min,
                              std::int64_t max);

}  // namespace flaxpp::cli
