// The CUDA backend's registration (built with FLAXPP_WITH_CUDA only): one device per visible
// GPU, each made on first use, the CUDA evaluator, and cuDNN's fused attention.
#include <memory>
#include <mutex>
#include <vector>

#include "backend/cuda/cuda_backend.hpp"
#include "backend/cuda/cuda_eval.hpp"
#include "backend/cuda/cudnn_attention.hpp"
#include "backend/registry.hpp"
#include "flaxpp/core/backend.hpp"
#include "flaxpp/ir/primitive.hpp"

namespace flaxpp::cuda {
namespace {

int visible_devices() {
  static const int count = device_count();
  return count;
}

Backend& gpu(int index) {
  // Every primitive call looks its backend up: after the first, a lookup is one atomic load
  // (call_once), not a lock. A constructor that throws leaves the slot for the next call.
  // Never destroyed, as the CPU's.
  static auto* const made =
      new std::vector<std::once_flag>(static_cast<std::size_t>(visible_devices()));
  static auto* const backends =
      new std::vector<std::unique_ptr<CudaBackend>>(static_cast<std::size_t>(visible_devices()));
  const auto i = static_cast<std::size_t>(index);
  std::call_once((*made)[i], [&] { (*backends)[i] = std::make_unique<CudaBackend>(index); });
  return *(*backends)[i];
}

[[gnu::constructor(FLAXPP_REGISTRATION_PRIORITY)]] void register_cuda() {
  register_backend_provider(DeviceKind::cuda, {visible_devices, gpu});
  ir::register_evaluator(DeviceKind::cuda, eval);
  register_cudnn_attention();
}

}  // namespace
}  // namespace flaxpp::cuda
