// flaxpp/nn/vmap.hpp — lifting a module into an ensemble (Flax's nn.vmap with
// variable_axes={"params": 0}, split_rngs={"params": True}, in_axes=None, out_axes=0,
// axis_size=E): E copies of the module, its members, each with its own parameters, stacked
// along a new leading axis of length E, all run on the same input; the output stacks theirs
// along a new leading axis. Apply runs the members as one batched computation
// (transforms/vmap.hpp): one product per layer for all members, not a loop. The lifted class is
// named "Vmap" + the module's class name (VmapMLP_0) and the module's children sit directly
// under it. Keys as Flax draws them: member i draws its parameters from split(params key, E)[i]
// with the paths and counters of one member; other streams (dropout) give every member the
// same keys. Only "params" is mapped: a module that makes variables of another collection is
// refused.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>

#include "flaxpp/nn/scope.hpp"

namespace flaxpp::nn {

namespace internal {
// One member of the ensemble: the module called as the member's scope, on the input.
using Member = std::function<Array(Scope& member, const Array& x)>;
// The ensemble of `size` copies of `member` in `s` (init: the stacked parameters are created;
// apply: they are read), on x.
Array vmap_members(Scope& s, const std::string& class_name, std::int64_t size, const Member& member,
                   const Array& x);
}  // namespace internal

template <class M>
struct Vmap {
  M module;
  std::int64_t size = 0;

  static std::string class_name() { return "Vmap" + module_name<M>(); }
  std::string instance_class_name() const { return "Vmap" + module_name_of(module); }

  // x -> the members' outputs, stacked along a new leading axis of length size.
  Array operator()(Scope& s, const Array& x) const {
    static_assert(module_callable_v<M, const Array&>,
                  "flaxpp: nn::vmap lifts a module called as module(scope, x) -> Array");
    return internal::vmap_members(
        s, instance_class_name(), size,
        [this](Scope& member, const Array& in) { return module(member, in); }, x);
  }
};

struct VmapOptions {
  std::int64_t axis_size = 0;  // the number of members (Flax's axis_size=)
};

// nn.vmap(M, variable_axes={"params": 0}, split_rngs={"params": True}, in_axes=None,
// out_axes=0, axis_size=E)(...):
//   auto ensemble = nn::vmap(nn::MLP{.features = {32, 10}}, {.axis_size = 5});
template <class M>
Model<Vmap<M>> vmap(M module, VmapOptions options) {
  return Model<Vmap<M>>(Vmap<M>{std::move(module), options.axis_size});
}

}  // namespace flaxpp::nn
