// Private to the backends: the table from each lax primitive to its evaluation, written once
// for every backend, so that the list of primitives — and which functor of
// flaxpp/kernels/elementwise.hpp each elementwise primitive applies — cannot differ between them.
// A backend supplies its evaluation families as the static members of a type (its
// `Families`), which the concept EvalFamilies states once. The layout primitives are built
// here from B::gather and layout_plan.hpp's plans.
#pragma once

#include <concepts>
#include <unordered_map>
#include <vector>

#include "backend/eval_impl.hpp"
#include "backend/layout_plan.hpp"
#include "flaxpp/core/error.hpp"
#include "flaxpp/ir/lax.hpp"
#include "flaxpp/ir/lax_convolution.hpp"
#include "flaxpp/ir/lax_random.hpp"
#include "flaxpp/ir/lax_windowed.hpp"
#include "flaxpp/kernels/arg_reduce.hpp"
#include "flaxpp/kernels/elementwise.hpp"

namespace flaxpp::backend_impl {

// What a backend's Families type provides: its dtype families (kNum for numeric ops, kFp for
// floating ones, kAny for comparisons and selects) and name in errors, and the evaluation of
// each family of primitives. binary<kAllowed, Op> and map_unary<kAllowed>(prim, x, out, op)
// apply an elementwise.hpp functor to the dtypes in kAllowed; arg_reduce<Better> is argmax or
// argmin (flaxpp/kernels/arg_reduce.hpp's choice), reduce_window<kMax> reduce_window_max or
// reduce_window_sum; gather writes a StridedCopy of x (every layout primitive);
// fused_elementwise returns its several results; random_words evaluates the three key
// primitives (random_words.hpp).
template <class B>
concept EvalFamilies = requires(const ir::Primitive& prim, std::span<const Array> in,
                                const ir::Params& params, const AVal& out,
                                std::span<const AVal> outs, const Array& x,
                                const StridedCopy& copy) {
  { B::kNum } -> std::convertible_to<unsigned>;
  { B::kFp } -> std::convertible_to<unsigned>;
  { B::kAny } -> std::convertible_to<unsigned>;
  { B::kName } -> std::convertible_to<const char*>;
  { B::template binary<B::kNum, kernels::Add>(prim, in, params, out) } -> std::same_as<Array>;
  { B::template map_unary<B::kFp>(prim, x, out, kernels::Exp{}) } -> std::same_as<Array>;
  { B::template arg_reduce<kernels::ArgmaxBetter>(prim, in, params, out) } -> std::same_as<Array>;
  { B::template reduce_window<true>(prim, in, params, out) } -> std::same_as<Array>;
#define FLAXPP_EVAL_REQUIRE_FAMILY(name) \
  { B::name(prim, in, params, out) } -> std::same_as<Array>;
  FLAXPP_EVAL_FAMILIES(FLAXPP_EVAL_REQUIRE_FAMILY)
#undef FLAXPP_EVAL_REQUIRE_FAMILY
  {
    B::fused_elementwise(prim, in, params, outs)
    } -> std::same_as<std::vector<Array>>;
  { B::gather(prim, x, copy, out) } -> std::same_as<Array>;
  { B::random_words(prim, in, params, out) } -> std::same_as<Array>;
};

// stop_gradient and name: the value itself (arrays are immutable, so sharing is safe).
inline Array identity(const ir::Primitive& /*prim*/, std::span<const Array> in,
                      const ir::Params& /*params*/, const AVal& /*out*/) {
  return in[0];
}

// The unary families and integer_pow, through B::map_unary.
template <class B, unsigned kAllowed, class Op>
Array unary(const ir::Primitive& prim, std::span<const Array> in, const ir::Params& /*params*/,
            const AVal& out) {
  return B::template map_unary<kAllowed>(prim, in[0], out, Op{});
}
template <class B>
Array integer_pow(const ir::Primitive& prim, std::span<const Array> in, const ir::Params& params,
                  const AVal& out) {
  return B::template map_unary<B::kNum>(prim, in[0], out,
                                        kernels::IntegerPow{params.get<std::int64_t>("y")});
}

template <EvalFamilies B>
Array broadcast_in_dim(const ir::Primitive& prim, std::span<const Array> in,
                       const ir::Params& params, const AVal& out) {
  const auto& bdims = params.get<std::vector<std::int64_t>>("broadcast_dimensions");
  return B::gather(prim, in[0], broadcast_copy(in[0].shape().dims(), bdims, out.shape.dims()), out);
}

// Row-major order is kept, so the bytes are the operand's (copied: Array offers no way to
// share its buffer under a new shape).
template <EvalFamilies B>
Array reshape(const ir::Primitive& prim, std::span<const Array> in, const ir::Params& /*params*/,
              const AVal& out) {
  return B::gather(prim, in[0], StridedCopy{{in[0].size()}, {1}}, out);
}

template <EvalFamilies B>
Array transpose(const ir::Primitive& prim, std::span<const Array> in, const ir::Params& params,
                const AVal& out) {
  const auto& perm = params.get<std::vector<std::int64_t>>("permutation");
  return B::gather(prim, in[0], transpose_copy(in[0].shape().dims(), perm), out);
}

template <EvalFamilies B>
Array slice(const ir::Primitive& prim, std::span<const Array> in, const ir::Params& params,
            const AVal& out) {
  return B::gather(
      prim, in[0],
      slice_copy(in[0].shape().dims(), params.get<std::vector<std::int64_t>>("start_indices"),
                 params.get<std::vector<std::int64_t>>("strides"), out.shape.dims()),
      out);
}

template <EvalFamilies B>
Array rev(const ir::Primitive& prim, std::span<const Array> in, const ir::Params& params,
          const AVal& out) {
  return B::gather(
      prim, in[0],
      rev_copy(in[0].shape().dims(), params.get<std::vector<std::int64_t>>("dimensions")), out);
}

template <EvalFamilies B>
const std::unordered_map<const ir::Primitive*, EvalFn>& eval_table() {
  namespace k = kernels;
  constexpr unsigned kAny = B::kAny;
  static const std::unordered_map<const ir::Primitive*, EvalFn> t = {
#define FLAXPP_EVAL_BINARY(name, Functor, dtypes, ...) \
  {&lax::name##_p, B::template binary<B::k##dtypes, k::Functor>},
#define FLAXPP_EVAL_COMPARISON(name, Functor, ...) \
  {&lax::name##_p, B::template binary<kAny, k::Functor>},
#define FLAXPP_EVAL_UNARY(name, Functor, dtypes, ...) \
  {&lax::name##_p, unary<B, B::k##dtypes, k::Functor>},
      FLAXPP_ELEMENTWISE_BINARY(FLAXPP_EVAL_BINARY)
          FLAXPP_ELEMENTWISE_COMPARISONS(FLAXPP_EVAL_COMPARISON)
              FLAXPP_ELEMENTWISE_UNARY(FLAXPP_EVAL_UNARY)
#undef FLAXPP_EVAL_BINARY
#undef FLAXPP_EVAL_COMPARISON
#undef FLAXPP_EVAL_UNARY
                  {&lax::integer_pow_p, integer_pow<B>},
#define FLAXPP_EVAL_FAMILY(name) {&lax::name##_p, B::name},
      FLAXPP_EVAL_FAMILIES(FLAXPP_EVAL_FAMILY)
#undef FLAXPP_EVAL_FAMILY
          {&lax::stop_gradient_p, identity},
      {&lax::name_p, identity},
      {&lax::broadcast_in_dim_p, broadcast_in_dim<B>},
      {&lax::reshape_p, reshape<B>},
      {&lax::transpose_p, transpose<B>},
      {&lax::slice_p, slice<B>},
      {&lax::rev_p, rev<B>},
      {&lax::argmax_p, B::template arg_reduce<k::ArgmaxBetter>},
      {&lax::argmin_p, B::template arg_reduce<k::ArgminBetter>},
      {&lax::reduce_window_sum_p, B::template reduce_window<false>},
      {&lax::reduce_window_max_p, B::template reduce_window<true>},
      {&lax::random_bits_p, B::random_words},
      {&lax::random_fold_in_p, B::random_words},
      {&lax::random_split_p, B::random_words},
  };
  return t;
}

// Evaluates `prim` through B's table; ValueError for a primitive B has no entry for.
// fused_elementwise, the one primitive with several results, is B::fused_elementwise.
template <EvalFamilies B>
std::vector<Array> eval_with(const ir::Primitive& prim, std::span<const Array> inputs,
                             const ir::Params& params, std::span<const AVal> out_avals) {
  if (&prim == &lax::fused_elementwise_p)
    return B::fused_elementwise(prim, inputs, params, out_avals);
  const auto& table = eval_table<B>();
  const auto it = table.find(&prim);
  if (it == table.end())
    throw ValueError(
        detail::str(prim.name(), ": the ", B::kName,
                    " backend has no implementation of it; a primitive defined outside flaxpp "
                    "registers one per device kind with ir::register_impl"));
  FLAXPP_ASSERT(out_avals.size() == 1, prim.name(), " has ", out_avals.size(), " results");
  return {it->second(prim, inputs, params, out_avals[0])};
}

}  // namespace flaxpp::backend_impl
