// ir::eval_primitive: eager evaluation of one primitive on concrete arrays — the shape rule,
// the choice of device, and the hand-off to the implementation the backends layer registered
// for that device kind (register_evaluator, register_impl). The ir layer names no backend.
#include <algorithm>
#include <array>
#include <atomic>
#include <string>
#include <unordered_map>
#include <vector>

#include "flaxpp/core/error.hpp"
#include "flaxpp/ir/primitive.hpp"

namespace flaxpp::ir {
namespace {

std::array<Evaluator, kNumDeviceKinds>& evaluators() {
  static std::array<Evaluator, kNumDeviceKinds> table{};
  return table;
}

// Per primitive: its implementation on each device kind (null where it has none).
std::unordered_map<const Primitive*, std::array<Evaluator, kNumDeviceKinds>>& impls() {
  static std::unordered_map<const Primitive*, std::array<Evaluator, kNumDeviceKinds>> table;
  return table;
}

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

// The primitive's own implementation on `kind` (register_impl), or null.
Evaluator own_impl(const Primitive& prim, DeviceKind kind) {
  if (impls().empty()) return nullptr;
  const auto it = impls().find(&prim);
  return it != impls().end() ? it->second[static_cast<std::size_t>(kind)] : nullptr;
}

// The kind's evaluator: arrays live on a device only through its backend, which registered
// its evaluator with it.
Evaluator evaluator_of(const Primitive& prim, DeviceKind kind) {
  const Evaluator e = evaluators()[static_cast<std::size_t>(kind)];
  FLAXPP_ASSERT(e != nullptr, prim.name(), ": no evaluator is registered for ", Device{kind, 0},
                " arrays (link flaxpp::flaxpp, which registers them)");
  return e;
}

std::atomic<void (*)()> progress_hook{nullptr};  // set_progress_hook's

}  // namespace

void set_progress_hook(void (*hook)()) {
  progress_hook.store(hook, std::memory_order_release);
}

void register_evaluator(DeviceKind kind, Evaluator evaluator) {
  evaluators()[static_cast<std::size_t>(kind)] = evaluator;
}

void register_impl(const Primitive& prim, DeviceKind kind, Evaluator impl) {
  impls()[&prim][static_cast<std::size_t>(kind)] = impl;
}

std::vector<Array> eval_primitive(const Primitive& prim, std::span<const Array> inputs,
                                  const Params& params) {
  if (void (*hook)() = progress_hook.load(std::memory_order_acquire)) hook();
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

  if (const Evaluator impl = own_impl(prim, device.kind)) {
    // A registered implementation is the user's code: results that break the shape rule are
    // its error, said plainly.
    std::vector<Array> results = impl(prim, on_device, params, out_avals);
    const auto fail = [&](const std::string& what) {
      throw ValueError(detail::str(prim.name(), ": its implementation on ", device,
                                   " (ir::register_impl) returned ", what,
                                   "; it must return the shape rule's results"));
    };
    if (results.size() != out_avals.size())
      fail(detail::str(results.size(), " results where the shape rule says ", out_avals.size()));
    for (std::size_t i = 0; i < results.size(); ++i) {
      if (!results[i].valid() || results[i].is_traced() || results[i].device() != device)
        fail(detail::str("result ", i, " not as a concrete array on ", device));
      if (results[i].aval() != out_avals[i])
        fail(detail::str("result ", i, " as ", results[i].aval(), " where the shape rule says ",
                         out_avals[i]));
    }
    return results;
  }
  std::vector<Array> results = evaluator_of(prim, device.kind)(prim, on_device, params, out_avals);
  FLAXPP_ASSERT(results.size() == out_avals.size(), prim.name(), ": ", results.size(),
                " results, the shape rule says ", out_avals.size());
  for (std::size_t i = 0; i < results.size(); ++i)
    FLAXPP_ASSERT(results[i].aval() == out_avals[i], prim.name(), " result ", i, " is ",
                  results[i].aval(), ", the shape rule says ", out_avals[i]);
  return results;
}

}  // namespace flaxpp::ir
