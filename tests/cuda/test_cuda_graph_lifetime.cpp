// A recorded CUDA graph's end: dropped inside another recording, it is destroyed when that
// recording ends instead of synchronising the captured stream, which would end the capture
// (desk review 2 #11); its memory then goes back to the driver (#5).
#include <doctest/doctest.h>

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <string>

#include "flaxpp/core/array.hpp"
#include "flaxpp/core/backend.hpp"
#include "flaxpp/ops/numpy.hpp"
#include "harness/cuda_parity.hpp"
#include "src/backend/cuda/cuda_backend.hpp"

using namespace flaxpp;
using testing::kNoGpu;
using testing::random_f32;
using testing::values;

namespace {

cuda::CudaBackend& gpu() { return dynamic_cast<cuda::CudaBackend&>(backend(Device::cuda(0))); }

}  // namespace

TEST_CASE("CUDA graphs: a graph dropped inside another recording goes when it ends, and the "
          "recording holds" *
          doctest::skip(kNoGpu)) {
  const Array x = random_f32(Shape{64}, 1).to(Device::cuda(0));
  const int live = gpu().live_graphs();
  std::string why;
  Array doubled;
  std::unique_ptr<DeviceGraph> first = gpu().capture([&] { doubled = x + x; }, why);
  REQUIRE_MESSAGE(first != nullptr, why);
  first->launch();
  CHECK(values(doubled) == values(random_f32(Shape{64}, 1) + random_f32(Shape{64}, 1)));
  Array squared;
  int live_inside = -1;
  std::unique_ptr<DeviceGraph> second = gpu().capture(
      [&] {
        squared = x * x;
        first.reset();  // a Jitted dropped inside recorded work
        live_inside = gpu().live_graphs();
      },
      why);
  REQUIRE_MESSAGE(second != nullptr, why);
  CHECK(live_inside == live + 1);  // still there while the recording ran
  CHECK(gpu().live_graphs() == live + 1);  // the second graph only
  second->launch();
  CHECK(values(squared) == values(random_f32(Shape{64}, 1) * random_f32(Shape{64}, 1)));
  second.reset();
  CHECK(gpu().live_graphs() == live);
}

TEST_CASE("CUDA graphs: a destroyed graph's memory goes back to the driver" *
          doctest::skip(kNoGpu)) {
  // 256 MiB of temporaries, which the launched graph's memory pool keeps until trimmed.
  const std::int64_t n = std::int64_t{64} << 20;
  const Array x = Array::full(Shape{n}, 0.5, DType::f32).to(Device::cuda(0));
  std::string why;
  Array total;
  std::unique_ptr<DeviceGraph> g = gpu().capture([&] { total = sum(exp(x) * x); }, why);
  REQUIRE_MESSAGE(g != nullptr, why);
  g->launch();
  gpu().synchronize();
  const auto reserved = [] {
    std::uint64_t bytes = 0;
    REQUIRE(cudaDeviceGetGraphMemAttribute(0, cudaGraphMemAttrReservedMemCurrent, &bytes) ==
            cudaSuccess);
    return bytes;
  };
  const std::uint64_t before = reserved();
  CHECK(before >= static_cast<std::uint64_t>(n) * 4);
  g.reset();
  // The kept result (4 bytes) may hold on to one block of the pool; the temporaries do not.
  CHECK(reserved() + static_cast<std::uint64_t>(n) * 2 <= before);
}
