// The backend registry: one backend per available device, created on first use.
#include <memory>
#include <mutex>
#include <vector>

#include "backend/cpu/cpu_backend.hpp"
#include "flaxpp/core/backend.hpp"
#include "flaxpp/core/error.hpp"
#ifdef FLAXPP_WITH_CUDA
#include "backend/cuda/cuda_backend.hpp"
#endif

namespace flaxpp {
namespace {

int cuda_device_count() {
#ifdef FLAXPP_WITH_CUDA
  static const int count = cuda::device_count();
  return count;
#else
  return 0;
#endif
}

}  // namespace

bool is_available(DeviceKind kind) {
  return kind == DeviceKind::cpu || cuda_device_count() > 0;
}

Backend& backend(Device device) {
  // Backends are never destroyed: buffers held by static Arrays may be released during
  // program exit, after function-local statics would have been.
  static auto* const cpu_backend = new cpu::CpuBackend();
  if (device.kind == DeviceKind::cpu) return *cpu_backend;
#ifndef FLAXPP_WITH_CUDA
  throw DeviceError(detail::str("device ", device,
                                " requested, but this flaxpp was built without "
                                "CUDA (FLAXPP_WITH_CUDA=OFF); use cpu, or rebuild with the CUDA "
                                "toolkit installed"));
#else
  auto available_devices = [] {
    std::string out = "cpu";
    for (int i = 0; i < cuda_device_count(); ++i)
      out += detail::str(", cuda:", i);
    return out;
  };
  if (device.index < 0 || device.index >= cuda_device_count())
    throw DeviceError(detail::str(
        "device ", device, " requested, but ",
        cuda_device_count() == 0 ? std::string("no CUDA GPU is visible")
                                 : detail::str(cuda_device_count(), " CUDA GPU(s) are visible"),
        "; available devices: ", available_devices()));
  // Every primitive call looks its backend up: after the first, a lookup is one atomic load
  // (call_once), not a lock. A constructor that throws leaves the slot for the next call.
  static auto* const made =
      new std::vector<std::once_flag>(static_cast<std::size_t>(cuda_device_count()));
  static auto* const backends = new std::vector<std::unique_ptr<cuda::CudaBackend> >(
      static_cast<std::size_t>(cuda_device_count()));
  const auto i = static_cast<std::size_t>(device.index);
  std::call_once((*made)[i],
                 [&] { (*backends)[i] = std::make_unique<cuda::CudaBackend>(device.index); });
  return *(*backends)[i];
#endif
}

}  // namespace flaxpp
