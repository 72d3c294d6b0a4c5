// The evaluation registry (ir/primitive.hpp): a primitive defined outside flaxpp's table gets
// its kernel per device kind with ir::register_impl; without one a backend says what to do,
// and an implementation that breaks the shape rule is a clear error, not an assertion. The
// built-in backends registered themselves before main (core's backend(), ir's evaluators).
#include <doctest/doctest.h>

#include <memory>
#include <vector>

#include "flaxpp/core/array.hpp"
#include "flaxpp/core/backend.hpp"
#include "flaxpp/core/device.hpp"
#include "flaxpp/ir/primitive.hpp"

using namespace flaxpp;

namespace {

std::vector<AVal> same_aval(std::span<const AVal> in, const ir::Params& /*params*/) {
  return {in[0]};
}

// x * 2 on the host: the kernel of the test primitives.
std::vector<Array> twice_cpu(const ir::Primitive& /*prim*/, std::span<const Array> in,
                             const ir::Params& /*params*/, std::span<const AVal> out) {
  const std::shared_ptr<Buffer> buffer = backend(Device::cpu()).allocate(in[0].nbytes());
  const auto* x = static_cast<const float*>(in[0].buffer().data());
  auto* y = static_cast<float*>(buffer->data());
  for (std::int64_t i = 0; i < in[0].size(); ++i)
    y[i] = 2.0f * x[i];
  return {Array(buffer, out[0].shape, out[0].dtype)};
}

// A wrong kernel: its result has one element less than the shape rule's.
std::vector<Array> short_cpu(const ir::Primitive& /*prim*/, std::span<const Array> in,
                             const ir::Params& /*params*/, std::span<const AVal> /*out*/) {
  return {Array::full(Shape{in[0].size() - 1}, 0.0, DType::f32, Device::cpu())};
}

const ir::Primitive twice_p("test_twice", same_aval);
const ir::Primitive unregistered_p("test_unregistered", same_aval);
const ir::Primitive broken_p("test_broken", same_aval);

}  // namespace

TEST_CASE("registry: the built-in backends registered themselves") {
  CHECK(is_available(DeviceKind::cpu));
  CHECK(backend(Device::cpu()).device() == Device::cpu());
  CHECK_THROWS_WITH_AS(backend(Device{DeviceKind::cuda, 99}),
                       doctest::Contains("cuda:99 requested"), DeviceError);
}

TEST_CASE("registry: a primitive defined outside flaxpp runs its registered kernel") {
  const Array x = Array::from_vector(std::vector<float>{1.0f, -2.0f, 3.5f}, Shape{3}, Device::cpu());
  const Array in[] = {x};
  CHECK_THROWS_WITH_AS(ir::bind1(unregistered_p, in),
                       doctest::Contains("test_unregistered: the CPU backend has no implementation "
                                         "of it; a primitive defined outside flaxpp registers one"),
                       ValueError);
  ir::register_impl(twice_p, DeviceKind::cpu, twice_cpu);
  CHECK(ir::bind1(twice_p, in).to_vector<float>() == std::vector<float>{2.0f, -4.0f, 7.0f});
  ir::register_impl(broken_p, DeviceKind::cpu, short_cpu);
  CHECK_THROWS_WITH_AS(ir::bind1(broken_p, in),
                       doctest::Contains("test_broken: its implementation on cpu "
                                         "(ir::register_impl) returned result 0 as f32[2] where "
                                         "the shape rule says f32[3]"),
                       ValueError);
}
