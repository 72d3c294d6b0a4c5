// ir::eval_primitive: eager evaluation of one primitive on concrete arrays — the shape rule,
// the choice of device, and the hand-off to that device's backend.
#include <algorithm>
#include <vector>

#include "backend/cpu/cpu_eval.hpp"
#include "backend/eval_impl.hpp"
#ifdef FLAXPP_WITH_CUDA
#include "backend/cuda/cuda_eval.hpp"
#endif
#include "flaxpp/core/error.hpp"
#include "flaxpp/ir/primitive.hpp"

namespace flaxpp {

void backend_impl::throw_unsupported_dtype(const ir::Primitive& prim, DType dtype, Device device) {
  throw ValueError(detail::str(prim.name(), ": the ", device,
                               " backend does not implement it for dtype ", dtype_name(dtype),
                               "; convert the operands with convert_element_type first"));
}

namespace ir {
namespace {

// Where `prim` runs: on the GPU its inputs are on, else on the CPU. Host (CPU) inputs join a
// computation on a GPU — they are copied there, as JAX moves uncommitted arrays — so
// constants and host-made values mix with device arrays; inputs on two different GPUs are
// an error.
Device pick_device(const Primitive& prim, std::span<const Array> inputs) {
  if (inputs.empty()) return default_device();
  const Array* gpu = nullptr;
  for (const Array& x : inputs) {
    if (x.device().kind == DeviceKind::cpu) continue;
    if (gpu == nullptr) {
      gpu = &x;
    } else if (x.device() != gpu->device()) {
      throw ValueError(detail::str(prim.name(), ": inputs on ", gpu->device(), " and ", x.device(),
                                   "; move them to one device with to() first"));
    }
  }
  return gpu != nullptr ? gpu->device() : Device::cpu();
}

}  // namespace

std::vector<Array> eval_primitive(const Primitive& prim, std::span<const Array> inputs,
                                  const Params& params) {
  std::vector<AVal> avals;
  avals.reserve(inputs.size());
  for (const Array& x : inputs) {
    FLAXPP_ASSERT(
        x.valid() && !x.is_traced(), prim.name(),
        ": eval_primitive needs concrete inputs (bind routes traced ones to their trace)");
    avals.push_back(x.aval());
  }
  const std::vector<AVal> out_avals = prim.shape_rule(avals, params);

  const Device device = pick_device(prim, inputs);
  // Host inputs of a GPU computation are copied there. Otherwise the caller's arrays go
  // through as they are (an extra copy of each would keep a donated buffer shared).
  std::vector<Array> moved;
  std::span<const Array> on_device = inputs;
  if (std::any_of(inputs.begin(), inputs.end(),
                  [&](const Array& x) { return x.device() != device; })) {
    moved.assign(inputs.begin(), inputs.end());
    for (Array& x : moved)
      x = x.to(device);
    on_device = moved;
  }

  std::vector<Array> results;
  switch (device.kind) {
    case DeviceKind::cpu:
      results = cpu::eval(prim, on_device, params, out_avals);
      break;
    case DeviceKind::cuda:
#ifdef FLAXPP_WITH_CUDA
      results = cuda::eval(prim, on_device, params, out_avals);
      break;
#else
      // backend() refuses CUDA devices in a CPU-only build, so no array can live on one.
      FLAXPP_ASSERT(false, prim.name(), ": a CUDA array in a build without CUDA");
#endif
  }

  FLAXPP_ASSERT(results.size() == out_avals.size(), prim.name(), ": ", results.size(),
                " results, the shape rule says ", out_avals.size());
  for (std::size_t i = 0; i < results.size(); ++i)
    FLAXPP_ASSERT(results[i].aval() == out_avals[i], prim.name(), " result ", i, " is ",
                  results[i].aval(), ", the shape rule says ", out_avals[i]);
  return results;
}

}  // namespace ir
}  // namespace flaxpp
