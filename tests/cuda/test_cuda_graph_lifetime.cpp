// A recorded CUDA graph's end: dropped inside another recording, it is destroyed when that
// recording ends instead of synchronising the captured stream, which would end the capture
// (desk review 2 #11).
#include <doctest/doctest.h>

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
