// flaxpp/nn/sequential.hpp — nn.Sequential: layers applied in order, each output feeding the
// next. Module entries run in child scopes named "layers_<index>" (their index in the list, as
// Flax names a list attribute's submodules); plain functions such as relu take no scope.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "flaxpp/nn/scope.hpp"

namespace flaxpp::nn {

struct Sequential {
  static constexpr const char* name = "Sequential";

  // One entry: a module (called with a child scope) or a plain function of an array.
  struct Layer {
    std::function<Array(Scope&, const Array&)> module{};
    std::function<Array(const Array&)> function{};
  };
  std::vector<Layer> layers{};

  Array operator()(Scope& s, const Array& x) const;
};

// A Sequential entry from a module (anything callable as module(Scope&, const Array&)).
template <class M>
requires std::is_invocable_r_v<Array, const M&, Scope&, const Array&> Sequential::Layer layer(
    M module) {
  return {[m = std::move(module)](Scope& s, const Array& x) { return m(s, x); }, {}};
}
// A Sequential entry from a plain function, such as relu.
inline Sequential::Layer layer(Array (*function)(const Array&)) {
  return {{}, function};
}

}  // namespace flaxpp::nn
