// flaxpp/transforms/checkpoint.hpp — jax.checkpoint (alias remat): trade memory for compute.
// checkpoint(f, policy) marks a region; when it is differentiated, the policy decides for each
// primal equation of the region whether its outputs are saved for the backward pass,
// recomputed there, or offloaded to host memory (jax/_src/ad_checkpoint.py; semantics doc §5).
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "flaxpp/ir/policy.hpp"
#include "flaxpp/ir/primitive.hpp"
#include "flaxpp/transforms/trace.hpp"

namespace flaxpp {

using PolicyPtr = std::shared_ptr<const ir::Policy>;

// jax.checkpoint_policies, spelled as in JAX.
namespace checkpoint_policies {
PolicyPtr everything_saveable();
PolicyPtr nothing_saveable();
PolicyPtr dots_saveable();
PolicyPtr checkpoint_dots();  // alias of dots_saveable
PolicyPtr dots_with_no_batch_dims_saveable();
PolicyPtr checkpoint_dots_with_no_batch_dims();  // alias
// Named values (checkpoint_name) only.
PolicyPtr save_only_these_names(std::vector<std::string> names);
PolicyPtr save_any_names_but_these(std::vector<std::string> names);
// Its documented meaning (JAX <= 0.10.1): named values saveable unless listed, and every
// unnamed value saveable. (JAX 0.10.2+ stubs it to everything_saveable.)
PolicyPtr save_anything_except_these_names(std::vector<std::string> names);
PolicyPtr save_and_offload_only_these_names(std::vector<std::string> names_which_can_be_saved,
                                            std::vector<std::string> names_which_can_be_offloaded,
                                            MemoryKind offload_src = MemoryKind::device,
                                            MemoryKind offload_dst = MemoryKind::pinned_host);
PolicyPtr offload_dot_with_no_batch_dims(MemoryKind offload_src = MemoryKind::device,
                                         MemoryKind offload_dst = MemoryKind::pinned_host);
// Logical OR; both must answer save or recompute (no offload), as in JAX.
PolicyPtr save_from_both_policies(PolicyPtr policy_1, PolicyPtr policy_2);
// A custom policy: called as JAX calls one, with the primitive, the input avals and params.
using PolicyFn =
    std::function<ir::Decision(const ir::Primitive&, std::span<const AVal>, const ir::Params&)>;
PolicyPtr custom(std::string name, PolicyFn fn);
// No checkpoint at all: checkpoint(f, none()) is f itself, and nn::remat(M, none()) is M
// (named as M, its values kept as plain autodiff keeps them). Not a JAX policy: the value that
// lets code sweep "no remat" beside the policies without another type (a template).
PolicyPtr none();
// Whether `policy` is none() (a null policy is nothing_saveable, not none).
bool is_none(const PolicyPtr& policy);
// The policy a JAX name denotes ("dots_saveable", ...) for the policies without arguments, and
// "none" for none(); throws ValueError listing the names otherwise.
PolicyPtr from_name(std::string_view name);
}  // namespace checkpoint_policies

// The higher-order primitive (JAX's remat_p, printed as checkpoint): params "jaxpr" (the body
// graph), "policy", "prevent_cse", "differentiated".
extern const ir::Primitive checkpoint_p;
// Copies a value to another memory kind (the offload of residuals): param "memory_kind".
extern const ir::Primitive device_put_p;

// jax.checkpoint(f, policy=..., static_argnums=..., prevent_cse=...). A null policy means
// nothing_saveable, as in JAX; checkpoint_policies::none() returns f unchanged. Arguments at
// `static_argnums` are passed concretely (not traced), so `f` may read their values. prevent_cse is
// kept for parity: flaxpp does no CSE across a region.
ArrayFn checkpoint(ArrayFn f, PolicyPtr policy = nullptr, std::vector<int> static_argnums = {},
                   bool prevent_cse = true);
inline ArrayFn remat(ArrayFn f, PolicyPtr policy = nullptr, std::vector<int> static_argnums = {},
                     bool prevent_cse = true) {
  return checkpoint(std::move(f), std::move(policy), std::move(static_argnums), prevent_cse);
}

// The typed form, for a function of Arrays that returns an Array (or std::vector<Array>):
//   auto layer = checkpoint([](const Array& x, const Array& w) { return relu(matmul(x, w)); },
//                           checkpoint_policies::dots_saveable());
//   Array y = layer(x, w);
// It is the span form underneath (the function's arguments in order), without static_argnums.
template <class F>
  requires(!std::is_invocable_v<const F&, std::span<const Array>>)
auto checkpoint(F f, PolicyPtr policy = nullptr) {
  return [f = std::move(f), policy = std::move(policy)]<class... Xs>(const Xs&... xs) {
    static_assert((std::is_convertible_v<const Xs&, const Array&> && ...),
                  "flaxpp: a typed checkpoint function takes Arrays; use the span form "
                  "(ArrayFn) for other arguments");
    using Result = std::invoke_result_t<const F&, const Xs&...>;
    const ArrayFn body = [f](std::span<const Array> a) {
      return [&]<std::size_t... I>(std::index_sequence<I...>) {
        if constexpr (std::is_same_v<Result, Array>) {
          return std::vector<Array>{f(a[I]...)};
        } else {
          return std::vector<Array>(f(a[I]...));
        }
      }(std::index_sequence_for<Xs...>{});
    };
    std::vector<Array> out = checkpoint(body, policy)(std::vector<Array>{Array(xs)...});
    if constexpr (std::is_same_v<Result, Array>) {
      return out[0];
    } else {
      return out;
    }
  };
}
template <class F>
  requires(!std::is_invocable_v<const F&, std::span<const Array>>)
auto remat(F f, PolicyPtr policy = nullptr) {
  return checkpoint(std::move(f), std::move(policy));
}

// jax.ad_checkpoint.checkpoint_name.
Array checkpoint_name(const Array& x, const std::string& name);

}  // namespace flaxpp
