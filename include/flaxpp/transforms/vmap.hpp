// flaxpp/transforms/vmap.hpp — vmap: a function of one example applied to a batch of them, as
// jax.vmap. The function is traced once for one example (the mapped axis of each mapped
// argument removed) and its graph runs on the whole batch through each primitive's batching
// rule (ir/primitive_rules.hpp), so a product of one example becomes one larger (or batched)
// product, not a loop. It composes with the other transforms either way round:
// vmap(grad(f)) gives per-example gradients, grad(vmap(f)) and jit(vmap(f)) trace through it.
//
//   // jax.vmap(jax.grad(loss), in_axes=(None, 0, 0))(params, x, labels)
//   Tree per_example = vmap(grad(loss), {not_mapped, 0, 0})(params, x, labels);
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "flaxpp/core/tree.hpp"
#include "flaxpp/transforms/trace.hpp"

namespace flaxpp {

// An axis of in_axes / out_axes, or none (JAX's None): the argument is the same for every
// example, or the result is (it must then not differ between examples).
using MapAxis = std::optional<std::int64_t>;
inline constexpr MapAxis not_mapped = std::nullopt;

struct VmapOptions {
  // Per argument (of the flat form: per array), the axis mapped over (negative counts from the
  // end), or not_mapped. Empty: axis 0 of every argument.
  std::vector<MapAxis> in_axes = {};
  // Per result, where its batch axis goes, or not_mapped. Empty: axis 0 of every result; one
  // entry: that of every result (JAX's out_axes given as one axis).
  std::vector<MapAxis> out_axes = {};
  // The number of examples (jax.vmap's axis_size): needed only when no argument is mapped,
  // else it must agree with the mapped axes.
  std::optional<std::int64_t> axis_size = std::nullopt;
};

// jax.vmap(f, in_axes, out_axes, axis_size) over a function of arrays. Mapped arguments must
// agree on the mapped axis's length; a result that is the same for every example comes out
// broadcast along its batch axis (or, under out_axes not_mapped, as it is).
ArrayFn vmap(ArrayFn f, VmapOptions options = {});

// The typed form, for a function of Arrays and Trees returning an Array or a Tree: one axis per
// argument, applying to every leaf of a Tree (JAX's in_axes prefix), and one for the result.
//   auto ys = vmap([&](const Tree& p, const Array& x) { return model.apply(p, x); },
//                  {not_mapped, 0})(params, xs);
template <class F>
requires(!std::is_convertible_v<F, ArrayFn>) auto vmap(F f, std::vector<MapAxis> in_axes,
                                                       MapAxis out_axis = 0) {
  return [f = std::move(f), in_axes = std::move(in_axes), out_axis]<class... Xs>(const Xs&... xs) {
    static_assert(((std::is_same_v<Xs, Array> || std::is_same_v<Xs, Tree>)&&...),
                  "vmap(f, in_axes)(args...): the arguments are Arrays and Trees");
    using Result = std::invoke_result_t<const F&, const Xs&...>;
    static_assert(std::is_same_v<Result, Array> || std::is_same_v<Result, Tree>,
                  "vmap(f, in_axes)(args...): f returns an Array or a Tree");
    const std::vector<Tree> args{Tree(xs)...};
    if (in_axes.size() != args.size())
      throw ValueError(detail::str("vmap: in_axes has ", in_axes.size(), " entries for ",
                                   args.size(),
                                   " arguments; give one per argument (not_mapped "
                                   "for those shared by every example)"));
    VmapOptions options;
    std::vector<Array> leaves;
    std::vector<std::size_t> counts;
    for (std::size_t i = 0; i < args.size(); ++i) {
      const std::vector<Array> mine = args[i].leaves();
      counts.push_back(mine.size());
      leaves.insert(leaves.end(), mine.begin(), mine.end());
      options.in_axes.insert(options.in_axes.end(), mine.size(), in_axes[i]);
    }
    Tree structure;  // the result's, seen while f is traced
    const ArrayFn flat = [&](std::span<const Array> in) {
      std::size_t next = 0, arg = 0;
      const auto one = [&]<class X>(const X& like) {
        const std::span<const Array> mine = in.subspan(next, counts[arg]);
        next += counts[arg++];
        return detail::with_leaves_like(like, mine);
      };
      // Braced: the arguments are rebuilt left to right.
      const Tree r(std::apply(f, std::tuple<Xs...>{one(xs)...}));
      structure = r;
      return r.leaves();
    };
    options.out_axes = {out_axis};
    const std::vector<Array> out = vmap(flat, std::move(options))(leaves);
    if constexpr (std::is_same_v<Result, Array>) {
      return out.at(0);
    } else {
      return structure.with_leaves(out);
    }
  };
}

}  // namespace flaxpp
