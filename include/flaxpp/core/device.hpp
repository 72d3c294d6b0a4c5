// flaxpp/core/device.hpp — where an array's buffer lives, and which device is the default.
#pragma once

#include <cstddef>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>

namespace flaxpp {

enum class DeviceKind { cpu, cuda };
// How many kinds there are: the size of a table indexed by DeviceKind.
inline constexpr std::size_t kNumDeviceKinds = 2;

struct Device {
  DeviceKind kind = DeviceKind::cpu;
  int index = 0;

  static Device cpu() { return {DeviceKind::cpu, 0}; }
  static Device cuda(int index = 0) { return {DeviceKind::cuda, index}; }
  // Parses "cpu", "cuda" or "cuda:N"; throws ValueError otherwise.
  static Device parse(std::string_view text);

  bool operator==(const Device&) const = default;
  std::string str() const;  // "cpu", "cuda:0"
};

std::ostream& operator<<(std::ostream& os, const Device& device);

// Whether a backend for `kind` is compiled in and has at least one usable device.
bool is_available(DeviceKind kind);

// The device new arrays go to when none is named: FLAXPP_DEVICE (cpu|cuda|cuda:N) when set,
// otherwise the first GPU when one is present, otherwise the CPU. set_default_device()
// overrides both; asking for an unavailable device is a DeviceError.
Device default_device();
void set_default_device(Device device);

// Within its lifetime, on this thread, default_device() is `device` (jax.default_device): the
// device of arrays made without one and of primitives without operands (iota). jit runs each
// step in its device's scope, so that such values are made where the step computes.
class DefaultDeviceScope {
 public:
  explicit DefaultDeviceScope(Device device);
  ~DefaultDeviceScope();
  DefaultDeviceScope(const DefaultDeviceScope&) = delete;
  DefaultDeviceScope& operator=(const DefaultDeviceScope&) = delete;

 private:
  std::optional<Device> previous_;
};

}  // namespace flaxpp
