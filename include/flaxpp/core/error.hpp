// flaxpp/core/error.hpp — the one error hierarchy of flaxpp, and the helpers that build
// messages. User-facing checks throw these with what was expected, what came and what to
// try; internal invariants use FLAXPP_ASSERT, which aborts (a bug in flaxpp, not in the
// caller's input).
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace flaxpp {

// Base of every exception flaxpp throws on purpose.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

// An argument has the wrong value, shape or dtype (the caller can fix the call).
class ValueError : public Error {
 public:
  using Error::Error;
};

// Input text (JSON files, configs, checkpoints) that is malformed or does not match its schema.
class ParseError : public Error {
 public:
  using Error::Error;
};

// A device is unavailable, or a device runtime call failed.
class DeviceError : public Error {
 public:
  using Error::Error;
};

// An allocation failed; the message names the request and the live/peak bytes.
class OutOfMemoryError : public DeviceError {
 public:
  using DeviceError::DeviceError;
};

// A multi-process job failed: a peer process died or stalled, a collective did not complete
// in time, or no transport was built for the job asked for. The message names the rank and the
// operation.
class DistributedError : public Error {
 public:
  using Error::Error;
};

namespace detail {

// Concatenates anything streamable into one string: str("got ", n, " dims").
template <class... Args>
std::string str(Args&&... args) {
  std::ostringstream os;
  (os << ... << std::forward<Args>(args));
  return os.str();
}

[[noreturn]] void assertion_failed(const char* expr, const char* file, int line,
                                   const std::string& msg);

}  // namespace detail
}  // namespace flaxpp

// Internal invariant: a violation is a bug in flaxpp. Active in every build type.
#define FLAXPP_ASSERT(cond, ...)                                                                \
  do {                                                                                          \
    if (!(cond))                                                                                \
      ::flaxpp::detail::assertion_failed(#cond, __FILE__, __LINE__,                             \
                                         ::flaxpp::detail::str("" __VA_OPT__(, ) __VA_ARGS__)); \
  } while (false)
