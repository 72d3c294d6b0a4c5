// flaxpp/nn/remat.hpp — lifting a module class into a rematerialised one (nn.remat /
// nn.checkpoint on a class). The lifted class is named "Checkpoint" + the class name, as in
// Flax, so an auto-named instance is CheckpointMLP_0 and everything inside it derives its keys
// from that path (semantics doc §3.3); as the root module nothing changes. Its children are
// named as usual. Keys drawn inside are those drawn without remat (same scope, same counters).
// Under checkpoint_policies::none() the lifted class is M itself: named M, run without a region.
#pragma once

#include <array>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "flaxpp/nn/scope.hpp"
#include "flaxpp/transforms/checkpoint.hpp"

namespace flaxpp {
namespace nn {

template <class M>
struct Checkpoint {
  M module;
  PolicyPtr policy{};  // nullptr: nothing_saveable
  std::vector<int>
      static_argnums{};  // positions (after the Scope) of Array arguments passed concretely
  bool prevent_cse = true;

  static std::string class_name() { return "Checkpoint" + module_name<M>(); }
  // M's own (of the wrapped instance) under checkpoint_policies::none(): no remat.
  std::string instance_class_name() const {
    return checkpoint_policies::is_none(policy) ? module_name_of(module)
                                                : "Checkpoint" + module_name_of(module);
  }

  // Array arguments are traced through the region (unless listed in static_argnums); any other
  // argument is a static value. Parameters the body reads become operands of the region.
  template <class... Args>
  auto operator()(Scope& s, const Args&... args) const {
    using Out = std::invoke_result_t<const M&, Scope&, const Args&...>;
    static_assert(std::is_same_v<Out, Array>, "a lifted module must return one Array");
    // Initialising computes no gradient; the body runs as is (the same parameters and keys).
    if (s.is_initializing() || checkpoint_policies::is_none(policy)) return module(s, args...);
    constexpr std::array<int, sizeof...(Args)> slot = array_slots<Args...>();
    std::vector<Array> arrays;
    std::vector<int> static_arrays;
    collect(arrays, args...);
    for (int pos : static_argnums) {
      if (pos < 0 || static_cast<std::size_t>(pos) >= sizeof...(Args) ||
          slot[static_cast<std::size_t>(pos)] < 0)
        throw ValueError(
            detail::str(instance_class_name(), " at ", s.path_str(), ": static_argnums contains ",
                        pos, ", which is not the position of an Array argument (the module takes ",
                        sizeof...(Args), " arguments after the Scope)"));
      static_arrays.push_back(slot[static_cast<std::size_t>(pos)]);
    }
    const auto args_tuple = std::forward_as_tuple(args...);
    // Variables the body writes (mutable collections) leave the region as extra results.
    internal::BodyWrites writes(s);
    const ArrayFn body = [&](std::span<const Array> in) {
      writes.open();
      std::vector<Array> out{
          call_with(s, in, args_tuple, std::index_sequence_for<Args...>{}, slot)};
      for (Array& v : writes.close())
        out.push_back(std::move(v));
      return out;
    };
    const std::vector<Array> results = checkpoint(body, policy, static_arrays, prevent_cse)(arrays);
    writes.commit(std::span<const Array>(results).subspan(1));
    return results[0];
  }

 private:
  template <class... Args>
  static constexpr std::array<int, sizeof...(Args)> array_slots() {
    std::array<int, sizeof...(Args)> out{};
    int next = 0;
    std::size_t i = 0;
    ((out[i++] = std::is_same_v<std::decay_t<Args>, Array> ? next++ : -1), ...);
    return out;
  }
  template <class... Args>
  static void collect(std::vector<Array>& arrays, const Args&... args) {
    (
        [&](const auto& a) {
          if constexpr (std::is_same_v<std::decay_t<decltype(a)>, Array>) arrays.push_back(a);
        }(args),
        ...);
  }
  template <class Tuple, std::size_t... I, std::size_t N>
  Array call_with(Scope& s, std::span<const Array> in, const Tuple& args, std::index_sequence<I...>,
                  const std::array<int, N>& slot) const {
    auto pick = [&]<std::size_t K>(std::integral_constant<std::size_t, K>) -> decltype(auto) {
      if constexpr (std::is_same_v<std::decay_t<std::tuple_element_t<K, Tuple>>, Array>) {
        return in[static_cast<std::size_t>(slot[K])];
      } else {
        return std::get<K>(args);
      }
    };
    return module(s, pick(std::integral_constant<std::size_t, I>{})...);
  }
};

// What remat<M>(...) returns: applied to a module, the lifted module, ready to init/apply or
// to be called as a child.
template <class M>
struct RematFactory {
  PolicyPtr policy;
  std::vector<int> static_argnums;
  bool prevent_cse = true;
  Model<Checkpoint<M>> operator()(M module) const {
    return Model<Checkpoint<M>>(
        Checkpoint<M>{std::move(module), policy, static_argnums, prevent_cse});
  }
};

}  // namespace nn

// nn.remat(M, policy=..., static_argnums=...) / nn.checkpoint: lifts module class M.
template <class M>
nn::RematFactory<M> remat(PolicyPtr policy = nullptr, std::vector<int> static_argnums = {},
                          bool prevent_cse = true) {
  return {std::move(policy), std::move(static_argnums), prevent_cse};
}
template <class M>
nn::RematFactory<M> checkpoint(PolicyPtr policy = nullptr, std::vector<int> static_argnums = {},
                               bool prevent_cse = true) {
  return remat<M>(std::move(policy), std::move(static_argnums), prevent_cse);
}

}  // namespace flaxpp
