// flaxpp/nn/nnx.hpp — the NNX-style stateful API (flax.nnx): modules own their parameters,
// nnx::Rngs hands out keys as fold_in(stream key, count++) (one counter per stream, shared by
// every module built from it; semantics doc §4), and state trees mirror NNX's (nnx::List
// elements under integer keys "0", "1", ...).
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "flaxpp/core/tree.hpp"
#include "flaxpp/random/initializers.hpp"
#include "flaxpp/random/key.hpp"
#include "flaxpp/transforms/checkpoint.hpp"

namespace flaxpp::nnx {

class Rngs {
 public:
  // nnx.Rngs(seed): one stream, "default", keyed by jax.random.key(seed).
  explicit Rngs(std::int64_t seed);
  // nnx.Rngs(**streams).
  explicit Rngs(std::map<std::string, random::Key> streams);

  // The next key of `stream` (falling back to "default" when absent, as NNX does).
  random::Key operator()(const std::string& stream = "default");
  random::Key params() { return (*this)("params"); }

 private:
  struct Stream {
    random::Key key;
    std::uint32_t count = 0;
  };
  std::map<std::string, Stream> streams_;
};

// nnx.Linear(in_features, out_features, rngs=...): kernel (in, out) then, with a bias, bias
// (out,) — one params key each, in that order.
// nnx.Linear's keyword arguments: nnx::Linear(3, 4, rngs, {.use_bias = false}).
struct LinearOptions {
  bool use_bias = true;
  initializers::Initializer kernel_init = initializers::lecun_normal();
  initializers::Initializer bias_init = initializers::zeros();
  DType param_dtype = DType::f32;
};

class Linear {
 public:
  Linear(std::int64_t in_features, std::int64_t out_features, Rngs& rngs,
         const LinearOptions& options = {});

  Array operator()(const Array& x) const;
  // {"kernel", "bias"} (bias only with use_bias).
  Tree state() const;
  Linear with_state(const Tree& state) const;

  const Array& kernel() const { return kernel_; }
  const Array& bias() const { return bias_; }

 private:
  Linear() = default;
  Array kernel_, bias_;
};

// nnx.List: a sequence of modules whose state tree uses the element indices as keys.
template <class T>
struct List {
  std::vector<T> items;

  std::size_t size() const { return items.size(); }
  const T& operator[](std::size_t i) const { return items[i]; }
  Tree state() const {
    Tree t;
    for (std::size_t i = 0; i < items.size(); ++i)
      t.set(std::to_string(i), items[i].state());
    return t;
  }
  List with_state(const Tree& state) const {
    List out;
    for (std::size_t i = 0; i < items.size(); ++i)
      out.items.push_back(items[i].with_state(state[std::to_string(i)]));
    return out;
  }
};

// nnx.state(module).
template <class M>
Tree state(const M& module) {
  return module.state();
}

// nnx.remat(f): f(module, x) computed in a checkpoint region whose operands are the module's
// state leaves and x (so gradients reach the parameters). M needs state() and with_state().
template <class M, class F>
auto remat(F f, PolicyPtr policy = nullptr) {
  return [f = std::move(f), policy = std::move(policy)](const M& module, const Array& x) -> Array {
    const Tree structure = module.state();
    std::vector<Array> operands = structure.leaves();
    operands.push_back(x);
    const ArrayFn body = [&](std::span<const Array> in) {
      const M inner = module.with_state(structure.with_leaves(in.subspan(0, in.size() - 1)));
      return std::vector<Array>{f(inner, in.back())};
    };
    return checkpoint(body, policy)(operands)[0];
  };
}

}  // namespace flaxpp::nnx
