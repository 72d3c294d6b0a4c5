// flaxpp/transforms/jit.hpp — jit: a function of trees traced once per input signature and
// replayed, as jax.jit. The trace (a Graph) goes through the graph passes (common
// subexpressions merged, dead code dropped), its constants are placed on the arguments'
// device, and every later call with the same signature runs it without tracing again.
// Donated arguments give their buffers to the call: values the graph reads for the last time
// release their memory there, and the fused updates write into them.
//
//   Jitted step = jit([&](std::span<const Tree> a) {
//                       auto [loss, g] = value_and_grad(loss_fn)(a[0]);
//                       return std::vector<Tree>{sgd_update(a[0], g), Tree(loss)};
//                     }, {.donate_argnums = {0}});
//   std::vector<Tree> out = step({std::move(params)});
//
// On a GPU the second call of a signature is recorded as one CUDA graph and later calls
// replay it (transforms/step_recording.hpp says what stays at fixed addresses, and when a
// call runs eagerly instead). FLAXPP_CUDA_GRAPHS=0 (or false, off) or set_cuda_graphs(false)
// turns recording off. A GPU step must not run while other threads queue work on that GPU.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <tuple>
#include <type_traits>
#include <typeindex>
#include <utility>
#include <vector>

#include "flaxpp/core/tree.hpp"
#include "flaxpp/ir/graph.hpp"
#include "flaxpp/transforms/memory_analysis.hpp"
#include "flaxpp/transforms/remat_plan.hpp"

namespace flaxpp {

struct JitOptions {
  // Arguments (by position) whose buffers the call may reuse for its results, as jax.jit's
  // donate_argnums. The caller's arrays of a donated argument are invalidated by the call:
  // reading one afterwards is a clear error.
  std::vector<int> donate_argnums{};
  // Chains of elementwise operations become one fused_elementwise pass each (ir/passes.hpp's
  // fuse_elementwise; the same bits). Off: every primitive runs on its own.
  bool fuse_elementwise = true;
  // A product's bias add joins the product (ir/passes.hpp's fuse_dot_bias: cuBLASLt's bias
  // epilogue on a GPU, one pass over the fresh product on the CPU; the same bits).
  bool fuse_dot_bias = true;
  // Each all_reduce (a gradient bucket's) starts as soon as its operands are final and is
  // waited for only before the next one starts, so that the processes exchange while this one
  // computes (ir/passes.hpp's overlap_collectives; the same results). Off: each waits where
  // it starts, and gradients are freed sooner.
  bool overlap_collectives = true;
  // Remat by budget: the most bytes the step may hold at once (its planned peak, arguments
  // included: parameters, optimiser state, the batch). For every checkpoint region, jit chooses
  // which values the backward pass keeps: the least recomputation time by the device's cost
  // model (ir::CostModel) among the choices that fit (flaxpp/transforms/remat_plan.hpp), per
  // input signature; a budget no choice fits is a ValueError naming the least peak. 0: no budget,
  // each region follows its own policy.
  std::int64_t memory_budget = 0;
};

// A function of trees; an Array argument or result is a one-leaf Tree.
using TreeFn = std::function<std::vector<Tree>(std::span<const Tree>)>;

// One traced signature of a jitted function, ready to run (jax.jit(f).lower(...).compile()).
class CompiledStep {
 public:
  // Runs the step. The arguments must have the traced signature (tree structure, dtypes,
  // shapes, devices); anything else is a ValueError naming the argument and path that differ.
  std::vector<Tree> operator()(std::vector<Tree> args) const;
  // The step's graph after the passes.
  const ir::Graph& graph() const;
  // Its memory, worked out before it runs (compiled.memory_analysis()): arguments, results,
  // results written into donated arguments, temporaries and the peak.
  const MemoryAnalysis& memory_analysis() const;
  // What JitOptions::memory_budget chose for this signature; nullptr without a budget.
  const RematPlan* remat_plan() const;
  // The signature it was traced for, e.g.
  // "[float32] ({b: f32[4]@cpu, w: f32[3,4]@cpu}, f32[8,3]@cpu)" (the matmul precision first).
  const std::string& signature() const;
  // Calls that launched its CUDA-graph recording (0 on the CPU).
  std::int64_t replays() const;

  struct Impl;

 private:
  friend class Jitted;
  // operator() once the arguments are known to have the traced signature.
  std::vector<Tree> run(std::vector<Tree> args) const;
  std::vector<Tree> assemble(std::vector<Array> results) const;
  explicit CompiledStep(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<const Impl> impl_;
};

class Jitted {
 public:
  Jitted(TreeFn f, JitOptions options);
  // Runs f on `args`, traced and compiled for their signature on first use; a new signature
  // traces again (e.g. a last, partial batch).
  std::vector<Tree> operator()(std::vector<Tree> args) const;
  // The compiled step for arguments like `args`, traced now if their signature is new.
  CompiledStep lower(std::span<const Tree> args) const;
  // How many signatures have been traced.
  std::size_t num_traces() const;
  // Records (on) or stops recording and forgets the recordings made (off) GPU steps as CUDA
  // graphs; on unless FLAXPP_CUDA_GRAPHS says otherwise.
  void set_cuda_graphs(bool on);
  // Calls, over every signature, that replayed a CUDA graph.
  std::int64_t replays() const;

 private:
  struct State;
  std::shared_ptr<State> state_;
};

Jitted jit(TreeFn f, JitOptions options = {});

// The typed form, for a function of Arrays and Trees that returns an Array, a Tree or a
// std::vector<Tree>:
//   auto predict = jit([](const Tree& params, const Array& x) { return model.apply(...); });
//   Array y = predict(params, x);
// It is the Tree form underneath (the arguments in order, donate_argnums counting them), one
// Jitted per combination of argument types.
template <class F>
requires(!std::is_invocable_v<const F&, std::span<const Tree>>) class TypedJitted {
 public:
  TypedJitted(F f, JitOptions options)
      : f_(std::move(f)), options_(std::move(options)), state_(std::make_shared<State>()) {}

  template <class... Xs>
  auto operator()(const Xs&... xs) const {
    static_assert(((std::is_same_v<Xs, Array> || std::is_same_v<Xs, Tree>)&&...),
                  "flaxpp: a typed jit function takes Arrays and Trees; use the Tree form "
                  "(TreeFn) for other arguments");
    using Result = std::invoke_result_t<const F&, const Xs&...>;
    static_assert(std::is_same_v<Result, Array> || std::is_same_v<Result, Tree> ||
                      std::is_same_v<Result, std::vector<Tree>>,
                  "flaxpp: a typed jit function returns an Array, a Tree or a std::vector<Tree>");
    std::vector<Tree> out = jitted<Xs...>()(std::vector<Tree>{Tree(xs)...});
    if constexpr (std::is_same_v<Result, Array>) {
      return out[0].array();
    } else if constexpr (std::is_same_v<Result, Tree>) {
      return out[0];
    } else {
      return out;
    }
  }
  // Signatures traced so far, over every combination of argument types.
  std::size_t num_traces() const {
    std::lock_guard lock(state_->mutex);
    std::size_t n = 0;
    for (const auto& [types, j] : state_->by_types)
      n += j.num_traces();
    return n;
  }

 private:
  struct State {
    mutable std::mutex mutex;
    std::map<std::type_index, Jitted> by_types;
  };

  template <class... Xs>
  Jitted jitted() const {
    std::lock_guard lock(state_->mutex);
    const std::type_index key(typeid(std::tuple<Xs...>));
    if (auto it = state_->by_types.find(key); it != state_->by_types.end()) return it->second;
    TreeFn body = [f = f_](std::span<const Tree> a) {
      return [&]<std::size_t... I>(std::index_sequence<I...>) {
        auto r = f(detail::tree_as<Xs>(a[I])...);
        if constexpr (std::is_same_v<decltype(r), std::vector<Tree>>) {
          return r;
        } else {
          return std::vector<Tree>{Tree(std::move(r))};
        }
      }
      (std::index_sequence_for<Xs...>{});
    };
    return state_->by_types.emplace(key, jit(std::move(body), options_)).first->second;
  }

  F f_;
  JitOptions options_;
  std::shared_ptr<State> state_;
};

template <class F>
requires(!std::is_invocable_v<const F&, std::span<const Tree>>)
    TypedJitted<F> jit(F f, JitOptions options = {}) {
  return TypedJitted<F>(std::move(f), std::move(options));
}

}  // namespace flaxpp
