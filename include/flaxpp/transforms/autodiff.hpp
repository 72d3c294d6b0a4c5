// flaxpp/transforms/autodiff.hpp — reverse-mode differentiation: vjp, grad, value_and_grad
// over arrays and parameter trees. Implemented as in JAX: trace the function, build the joint
// forward/backward graph from each primitive's VJP rule, split it by partial evaluation into a
// forward part (run now, keeping only the residuals the backward part needs) and a backward
// part (run when the cotangents come).
#pragma once

#include <functional>
#include <initializer_list>
#include <memory>
#include <ostream>
#include <span>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "flaxpp/core/array.hpp"
#include "flaxpp/core/tree.hpp"
#include "flaxpp/transforms/trace.hpp"

namespace flaxpp {

// The forward outputs, and the backward function: output cotangents -> input cotangents
// (zeros for inputs the outputs do not depend on). The backward function holds the
// residuals; it may be called more than once.
struct VjpResult {
  std::vector<Array> outputs;
  std::function<std::vector<Array>(std::span<const Array> cotangents)> backward;
  // The same, but it hands the residuals to the backward pass, which frees each after its last
  // use (lower peak memory); after it, neither function may be called again.
  std::function<std::vector<Array>(std::span<const Array> cotangents)> backward_once;
  // backward_once handing each input cotangent to on_input(i, ct) as soon as it is final (the
  // last layer's gradients first), so the caller can consume them while the backward pass
  // goes on (apply_gradients leaf by leaf) instead of holding all of them at once. Inputs a
  // CompiledVjp was told are not differentiable (e.g. the batch) get no call, not zeros.
  std::function<void(std::span<const Array> cotangents, const OutputSink& on_input)> backward_into;
  // Bytes held as residuals between the forward and the backward pass.
  std::int64_t residual_bytes = 0;
  // The backward graph, for inspection (e.g. counting recomputed dot_generals).
  std::shared_ptr<const ir::Graph> backward_graph;
};

// jax.vjp(f, *primals).
VjpResult vjp(const ArrayFn& f, std::span<const Array> primals);

// The typed form: jax.vjp(f, *primals) for a function of Arrays and Trees returning an Array.
// Returns f's value and the backward function, which maps the output's cotangent to a tuple
// of the arguments' cotangents, each of its argument's type:
//   auto [y, back] = vjp([](const Tree& p, const Array& x) { return ...; }, params, x);
//   auto [dparams, dx] = back(ones_like(y));
template <class F, class... Xs>
requires(sizeof...(Xs) > 0 && ((std::is_same_v<Xs, Array> ||
                                std::is_same_v<Xs, Tree>)&&...)) auto vjp(F f, const Xs&... xs) {
  const std::tuple<Xs...> structures{xs...};
  const std::vector<std::size_t> counts{Tree(xs).leaves().size()...};
  std::vector<Array> primals;
  (..., [&](const Tree& t) {
    for (Array& a : t.leaves())
      primals.push_back(std::move(a));
  }(Tree(xs)));
  // The arguments of f rebuilt from flat leaves: counts[i] of them for argument i.
  const auto unflatten = [structures, counts](std::span<const Array> leaves) {
    std::size_t next = 0;
    const auto one = [&]<class X>(const X& like, std::size_t count) {
      const std::span<const Array> mine = leaves.subspan(next, count);
      next += count;
      return detail::with_leaves_like(like, mine);
    };
    return [&]<std::size_t... I>(std::index_sequence<I...>) {
      return std::tuple<Xs...>{one(std::get<I>(structures), counts[I])...};
    }
    (std::index_sequence_for<Xs...>{});
  };
  const ArrayFn flat = [f, unflatten](std::span<const Array> in) {
    return std::vector<Array>{Array(std::apply(f, unflatten(in)))};
  };
  VjpResult r = vjp(flat, primals);
  auto back = [backward = r.backward, unflatten](const Array& ct) {
    return unflatten(backward(std::span<const Array>(&ct, 1)));
  };
  return std::pair{std::move(r.outputs[0]), std::move(back)};
}

struct Linearized;
// f's forward and backward graphs, traced once for the given input avals and replayed by
// each call without tracing again (what jax.jit does for a train step). Inputs marked false
// in `differentiable` (e.g. the batch) get no cotangent (zeros are returned for them).
class CompiledVjp {
 public:
  CompiledVjp(const ArrayFn& f, std::span<const AVal> avals, std::vector<bool> differentiable = {});
  // The same as vjp(f, primals); the primals must have the traced avals.
  VjpResult operator()(std::span<const Array> primals) const;
  // The avals of f's outputs.
  const std::vector<AVal>& output_avals() const;
  // The same function with its constants on `device` (ir::with_constants_on), for primals
  // on that device: its passes then copy nothing from the host.
  CompiledVjp on(Device device) const;

 private:
  explicit CompiledVjp(std::shared_ptr<const Linearized> lin) : lin_(std::move(lin)) {}
  std::shared_ptr<const Linearized> lin_;
};

// One value vjp(f) keeps between the forward and the backward pass, described as
// jax.ad_checkpoint.saved_residuals describes it.
struct SavedResidual {
  enum class Kind { argument, constant, literal, named, output };
  AVal aval;
  Kind kind = Kind::output;
  int argument = -1;                            // argument: its position
  std::string name;                             // named: the checkpoint_name
  std::string primitive;                        // output: the primitive that produced it
  MemoryKind memory_kind = MemoryKind::device;  // pinned_host for offloaded residuals
  // JAX's line: "f32[5,4] from the argument x", "f32[5,4] output of dot_general", ...
  std::string str(std::span<const std::string> arg_names = {}) const;
};

// The residuals vjp(f, args) would keep (jax._src.ad_checkpoint.saved_residuals); nothing
// is computed.
std::vector<SavedResidual> saved_residuals(const ArrayFn& f, std::span<const Array> args);
void print_saved_residuals(const ArrayFn& f, std::span<const Array> args,
                           std::span<const std::string> arg_names, std::ostream& os);

// A loss function of several trees (an Array argument is a one-leaf tree).
using TreeLossFn = std::function<Array(std::span<const Tree>)>;

struct ValueAndGrad {
  Array value;
  std::vector<Tree> grads;  // one per differentiated argument, in argnums order
};

// jax.value_and_grad(f, argnums)(*args) for a scalar floating loss: gradients with respect to
// the arguments in `argnums` (the others are held constant).
ValueAndGrad value_and_grad(const TreeLossFn& f, std::span<const Tree> args,
                            std::span<const int> argnums);

// jax.value_and_grad(f, argnums, has_aux=True): f returns the loss and a tree of auxiliary
// values (e.g. updated batch statistics), returned beside the loss and not differentiated.
using TreeLossAuxFn = std::function<std::pair<Array, Tree>(std::span<const Tree>)>;
struct ValueAuxAndGrad {
  Array value;
  Tree aux;
  std::vector<Tree> grads;  // one per differentiated argument, in argnums order
};
ValueAuxAndGrad value_and_grad_with_aux(const TreeLossAuxFn& f, std::span<const Tree> args,
                                        std::span<const int> argnums);

// The typed forms, returning callables as JAX does: a function of Arrays and Trees returning a
// scalar loss, differentiated with respect to its first argument (JAX's argnums=0); the
// gradient has that argument's type:
//   auto [loss, g] = value_and_grad([&](const Tree& p, const Array& x) { return ...; })(params, x);
//   Array g = grad([](const Array& x) { return sum(square(x)); })(x);
template <class F>
requires(!std::is_invocable_v<const F&, std::span<const Tree>>) auto value_and_grad(F f) {
  // Constrained rather than asserted, so that other transforms can ask whether it takes
  // their argument types (jit's and vmap's typed forms do).
  return [f = std::move(f)]<class X0, class... Xs>(const X0& x0, const Xs&... xs) requires(
      (std::is_same_v<X0, Array> || std::is_same_v<X0, Tree>)&&... &&
      (std::is_same_v<Xs, Array> || std::is_same_v<Xs, Tree>)) {
    const std::vector<Tree> args{Tree(x0), Tree(xs)...};
    const int argnums[] = {0};
    ValueAndGrad r = value_and_grad(
        [&f](std::span<const Tree> a) {
          return [&]<std::size_t... I>(std::index_sequence<I...>) {
            return Array(f(detail::tree_as<X0>(a[0]), detail::tree_as<Xs>(a[I + 1])...));
          }
          (std::index_sequence_for<Xs...>{});
        },
        args, argnums);
    return std::pair<Array, X0>{std::move(r.value), detail::tree_as<X0>(r.grads[0])};
  };
}

template <class F>
requires(!std::is_invocable_v<const F&, std::span<const Tree>>) auto grad(F f) {
  using ValueAndGradFn = decltype(value_and_grad(std::move(f)));
  return [vg = value_and_grad(std::move(f))](
             const auto&... xs) -> decltype(std::declval<const ValueAndGradFn&>()(xs...).second) {
    return vg(xs...).second;
  };
}

}  // namespace flaxpp
