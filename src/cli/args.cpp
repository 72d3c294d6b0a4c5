// Option values of the `flaxpp` subcommands.
#include "cli/args.hpp"

#include <charconv>

namespace flaxpp::cli {

const std::string& option_value(const std::vector<std::string>& args, std::size_t& i) {
  if (i + 1 >= args.size()) throw UsageError(detail::str(args[i], " needs a value"));
  return args[++i];
}

std::int64_t parse_int_option(std::string_view flag, std::string_view value, std::int64_t min,
                              std::int64_t max) {
  std::int64_t parsed = 0;
  const char* end = value.data() + value.size();
  const auto [ptr, ec] = std::from_chars(value.data(), end, parsed);
  if (value.empty() || ec != std::errc() || ptr != end || parsed < min || parsed > max)
    throw UsageError(detail::str(flag, ": expected an integer from ", min, " to ", max, ", got \"",
                                 value, "\""));
  return parsed;
}

}  // namespace flaxpp::cli
