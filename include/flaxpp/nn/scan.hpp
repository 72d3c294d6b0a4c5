// flaxpp/nn/scan.hpp — lifting a module into a scan over layers (Flax's nn.scan with
// variable_axes={"params": 0}, split_rngs={"params": True}, length=L): the module runs L times
// on a carry, its parameters stacked along a new leading axis of length L, and its graph is
// traced once (transforms/scan.hpp), so depth does not grow the trace. The lifted class is
// named "Scan" + the module's class name (ScanBlock_0; ScanCheckpointBlock_0 for
// nn::scan(remat<Block>(...)(...)) as in Flax) and the module's children sit directly under
// it. Keys as Flax draws them (semantics doc §3.8): layer i draws its parameters from
// split(params key, L)[i] with the paths and counters of one layer; other streams (dropout)
// give every layer the same keys. "params" and the collections of variable_axes are scanned
// (Flax's variable_axes={"params": 0, "batch_stats": 0}): their variables stacked per layer,
// and a layer's new values of a mutable one (BatchNorm's statistics, with apply_mutable) come
// out stacked; a module that makes variables of another collection is refused.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "flaxpp/nn/scope.hpp"

namespace flaxpp::nn {

namespace internal {
// One layer of the scan: the module called as the layer's scope, on the carry.
using ScanLayer = std::function<Array(Scope& layer, const Array& carry)>;
// The scan of `layer` over `length` layers in `s` (init: the stacked parameters are created;
// apply: they are read), starting from `carry`; `variable_axes` the collections stacked besides
// "params".
Array scan_layers(Scope& s, const std::string& class_name, std::int64_t length,
                  const ScanLayer& layer, const Array& carry,
                  const std::vector<std::string>& variable_axes);
}  // namespace internal

template <class M>
struct Scan {
  M module;
  std::int64_t length = 0;
  std::vector<std::string> variable_axes{"params"};

  static std::string class_name() { return "Scan" + module_name<M>(); }
  std::string instance_class_name() const { return "Scan" + module_name_of(module); }

  // carry -> carry: the module must map its input to an output of the same shape and dtype.
  Array operator()(Scope& s, const Array& carry) const {
    static_assert(module_callable_v<M, const Array&>,
                  "flaxpp: nn::scan lifts a module called as module(scope, carry) -> carry");
    return internal::scan_layers(
        s, instance_class_name(), length,
        [this](Scope& layer, const Array& c) { return module(layer, c); }, carry, variable_axes);
  }
};

struct ScanOptions {
  std::int64_t length = 0;  // the number of layers (Flax's length=)
  // The collections stacked along axis 0 (Flax's variable_axes with axis 0 each): "params"
  // always, e.g. {"params", "batch_stats"} for layers with batch norm.
  std::vector<std::string> variable_axes{"params"};
};

// nn.scan(M, variable_axes={"params": 0}, split_rngs={"params": True}, length=L)(...):
//   auto stack = nn::scan(remat<TransformerBlock>(policy)(TransformerBlock{4, 64}),
//                         {.length = 8});
template <class M>
Model<Scan<M>> scan(M module, ScanOptions options) {
  return Model<Scan<M>>(Scan<M>{std::move(module), options.length, options.variable_axes});
}

}  // namespace flaxpp::nn
