// The CUDA backend on a real GPU: allocation accounting on the stream-ordered pool, pinned
// host memory, round trips. Without a GPU every case but the report is skipped, and doctest's
// summary counts them ("N skipped") — never a silent pass.
#include <doctest/doctest.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "flaxpp/core/array.hpp"
#include "flaxpp/core/backend.hpp"
#include "flaxpp/ops/numpy.hpp"
#include "src/backend/cuda/cuda_eval.hpp"

using namespace flaxpp;

namespace {
// Evaluated when the test cases register.
const bool kNoGpu = !is_available(DeviceKind::cuda);
}  // namespace

TEST_CASE("CUDA: report whether this run exercised a GPU") {
  if (kNoGpu) {
    MESSAGE(
        "NO CUDA GPU VISIBLE: every other CUDA test case is SKIPPED; this run proves nothing about "
        "CUDA");
  } else {
    MESSAGE("CUDA suite running on " << Device::cuda(0));
  }
}

TEST_CASE("CUDA: arrays round-trip host -> device -> host bit-exactly" * doctest::skip(kNoGpu)) {
  const std::vector<float> values{1.5f, -2.0f, 3.25f, 0.0f, 1e-30f};
  const Array a = Array::from_vector(values, Shape{5}, Device::cuda(0));
  CHECK(a.device() == Device::cuda(0));
  CHECK(a.to_vector<float>() == values);
  CHECK(a.to(Device::cpu()).to_vector<float>() == values);
}

TEST_CASE("CUDA: device live/peak bytes follow buffers on the stream-ordered pool" *
          doctest::skip(kNoGpu)) {
  Backend& gpu = backend(Device::cuda(0));
  const std::int64_t live0 = gpu.memory_stats().live_bytes;
  gpu.reset_peak_memory();
  {
    const Array a = Array::full(Shape{1 << 20}, 1.0, DType::f32, Device::cuda(0));
    CHECK(gpu.memory_stats().live_bytes == live0 + (4 << 20));
  }
  CHECK(gpu.memory_stats().live_bytes == live0);
  CHECK(gpu.memory_stats().peak_bytes == live0 + (4 << 20));
}

TEST_CASE("CUDA: pinned host buffers are counted in their own pool" * doctest::skip(kNoGpu)) {
  Backend& gpu = backend(Device::cuda(0));
  const std::int64_t host0 = gpu.memory_stats(MemoryKind::pinned_host).live_bytes;
  auto buffer = gpu.allocate(4096, MemoryKind::pinned_host);
  CHECK(gpu.memory_stats(MemoryKind::pinned_host).live_bytes == host0 + 4096);
}

TEST_CASE("CUDA: an impossible allocation is an OutOfMemoryError that suggests a remat policy" *
          doctest::skip(kNoGpu)) {
  // Twice the device's memory: over what the device has, within what the driver can address.
  const std::int64_t twice = 2 * cuda::device_memory_bytes(Device::cuda(0));
  CHECK_THROWS_WITH_AS(backend(Device::cuda(0)).allocate(twice), doctest::Contains("remat policy"),
                       OutOfMemoryError);
  // Nothing was left behind: the next kernel's launch check does not see an old error.
  CHECK(Array::full(Shape{4}, 2.0, DType::f32, Device::cuda(0)).to_vector<float>() ==
        std::vector<float>(4, 2.0f));
}

TEST_CASE("CUDA: uploads from pageable memory may be freed at once; device copies keep order" *
          doctest::skip(kNoGpu)) {
  // Many uploads through the pinned staging slots (more than there are slots), each source
  // freed and overwritten as soon as the call returns, none waited for: every array must hold
  // what its source held at the call (desk review F5).
  Backend& gpu = backend(Device::cuda(0));
  std::vector<Array> uploaded;
  for (int i = 0; i < 40; ++i) {
    auto host = std::make_unique<std::vector<float>>(static_cast<std::size_t>(1000 + 97 * i),
                                                     static_cast<float>(i));
    uploaded.push_back(Array::from_vector(*host, Shape{1000 + 97 * i}, Device::cuda(0)));
    std::fill(host->begin(), host->end(), -1.0f);  // the caller reuses its memory at once
  }
  // A device-to-device copy is queued like compute: it sees the uploads before it, and the
  // kernels after it see its result.
  auto dst = gpu.allocate(uploaded[39].nbytes());
  gpu.copy(uploaded[39].buffer(), *dst, uploaded[39].nbytes());
  const Array copied(dst, uploaded[39].shape(), DType::f32);
  for (int i = 0; i < 40; ++i)
    CHECK(uploaded[static_cast<std::size_t>(i)].to_vector<float>() ==
          std::vector<float>(static_cast<std::size_t>(1000 + 97 * i), static_cast<float>(i)));
  CHECK((copied + 1.0).to_vector<float>() == std::vector<float>(1000 + 97 * 39, 40.0f));
}
