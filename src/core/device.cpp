// Device parsing/printing and the default-device rule.
#include "flaxpp/core/device.hpp"

#include <cstdlib>
#include <mutex>
#include <optional>

#include "flaxpp/core/backend.hpp"
#include "flaxpp/core/error.hpp"

namespace flaxpp {

Device Device::parse(std::string_view text) {
  if (text == "cpu") return cpu();
  if (text == "cuda") return cuda(0);
  if (constexpr std::string_view prefix = "cuda:"; text.substr(0, prefix.size()) == prefix) {
    // Up to 5 decimal digits, checked before any arithmetic (a longer index would overflow).
    const std::string_view digits = text.substr(prefix.size());
    bool ok = !digits.empty() && digits.size() < 6;
    for (const char c : digits)
      ok = ok && c >= '0' && c <= '9';
    if (ok) {
      int index = 0;
      for (const char c : digits)
        index = index * 10 + (c - '0');
      return cuda(index);
    }
  }
  throw ValueError(detail::str("unknown device \"", text, "\"; expected cpu, cuda or cuda:N"));
}

std::string Device::str() const {
  return kind == DeviceKind::cpu ? std::string("cpu") : detail::str("cuda:", index);
}

std::ostream& operator<<(std::ostream& os, const Device& device) {
  return os << device.str();
}

namespace {

std::mutex g_default_mutex;
std::optional<Device> g_default_device;
// The innermost DefaultDeviceScope's device on this thread.
thread_local std::optional<Device> t_scoped_device;

Device initial_default_device() {
  if (const char* env = std::getenv("FLAXPP_DEVICE"); env != nullptr && *env != '\0') {
    Device device = Device::parse(env);
    backend(device);  // throws DeviceError when FLAXPP_DEVICE names an unavailable device
    return device;
  }
  return is_available(DeviceKind::cuda) ? Device::cuda(0) : Device::cpu();
}

}  // namespace

Device default_device() {
  if (t_scoped_device) return *t_scoped_device;
  std::lock_guard lock(g_default_mutex);
  if (!g_default_device) g_default_device = initial_default_device();
  return *g_default_device;
}

void set_default_device(Device device) {
  backend(device);  // validate before storing
  std::lock_guard lock(g_default_mutex);
  g_default_device = device;
}

DefaultDeviceScope::DefaultDeviceScope(Device device) : previous_(t_scoped_device) {
  t_scoped_device = device;
}

DefaultDeviceScope::~DefaultDeviceScope() {
  t_scoped_device = previous_;
}

}  // namespace flaxpp
