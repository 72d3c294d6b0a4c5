// backend() and is_available(): lookups in the table of providers the backends layer
// registered, one per device kind. Core names no concrete backend.
#include <array>
#include <string>

#include "flaxpp/core/backend.hpp"
#include "flaxpp/core/error.hpp"

namespace flaxpp {
namespace {

std::array<BackendProvider, kNumDeviceKinds>& providers() {
  static std::array<BackendProvider, kNumDeviceKinds> table{};
  return table;
}

const BackendProvider& provider(DeviceKind kind) {
  return providers()[static_cast<std::size_t>(kind)];
}

int device_count(DeviceKind kind) {
  const BackendProvider& p = provider(kind);
  return p.device_count != nullptr ? p.device_count() : 0;
}

std::string available_devices() {
  std::string out = device_count(DeviceKind::cpu) > 0 ? "cpu" : "";
  for (int i = 0; i < device_count(DeviceKind::cuda); ++i)
    out += detail::str(out.empty() ? "" : ", ", "cuda:", i);
  return out.empty() ? "none" : out;
}

}  // namespace

void register_backend_provider(DeviceKind kind, BackendProvider p) {
  FLAXPP_ASSERT(p.device_count != nullptr && p.get != nullptr,
                "register_backend_provider: a provider needs both functions");
  providers()[static_cast<std::size_t>(kind)] = p;
}

bool is_available(DeviceKind kind) {
  return device_count(kind) > 0;
}

Backend& backend(Device device) {
  const BackendProvider& p = provider(device.kind);
  if (p.get == nullptr) {
    if (device.kind == DeviceKind::cuda)
      throw DeviceError(detail::str("device ", device,
                                    " requested, but this flaxpp was built without CUDA "
                                    "(FLAXPP_WITH_CUDA=OFF); use cpu, or rebuild with the CUDA "
                                    "toolkit installed"));
    throw DeviceError(detail::str("device ", device,
                                  " requested, but no backend for it is registered: link "
                                  "flaxpp::flaxpp, which registers the built-in backends"));
  }
  const int count = p.device_count();
  if (device.index < 0 || device.index >= count)
    throw DeviceError(detail::str("device ", device, " requested, but ",
                                  device.kind != DeviceKind::cuda
                                      ? detail::str(count, " such device(s) exist")
                                  : count == 0 ? std::string("no CUDA GPU is visible")
                                               : detail::str(count, " CUDA GPU(s) are visible"),
                                  "; available devices: ", available_devices()));
  return p.get(device.index);
}

}  // namespace flaxpp
