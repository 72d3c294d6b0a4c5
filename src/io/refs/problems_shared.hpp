// Private to the reference problems: what several problem families share — checked reads of
// inputs (float32 arrays, sizes, policy specs), and the sum-of-squares loss of a model whose
// gradients the *_grad problems compare and whose residuals saved_residuals lists.
#pragma once

#include <optional>
#include <span>

#include "flaxpp/io/policy_spec.hpp"
#include "flaxpp/io/refs.hpp"
#include "io/refs/case_budget.hpp"
#include "flaxpp/nn/scope.hpp"
#include "flaxpp/ops/numpy.hpp"
#include "flaxpp/transforms/autodiff.hpp"
#include "flaxpp/transforms/checkpoint.hpp"

namespace flaxpp::refs {

// Input `key`: float32 data of rank >= min_rank, on the case's device.
inline Array float_input(const Inputs& in, const char* key, const CaseContext& cx,
                         std::int64_t min_rank) {
  const Array a = in.array(key);
  if (a.dtype() != DType::f32 || a.rank() < min_rank)
    throw InputError(detail::str(
        in.path(), ".", key, ": expected float32 data of rank >= ", min_rank, ", got ", a.aval()));
  return a.to(cx.device);
}

// Input "policy": a policy spec ("none": checkpoint_policies::none()).
inline PolicyPtr policy_input(const Inputs& in) {
  if (!in.has("policy"))
    throw InputError(detail::str(in.path(), ".policy: missing (a policy spec or \"none\")"));
  try {
    return io::policy_from_spec(in.raw("policy"), in.path() + ".policy");
  } catch (const ParseError& e) {
    throw InputError(e.what());
  }
}

// jax.value_and_grad of sum(model.apply({"params": p}, x) ** 2) with respect to p.
template <class Model>
ValueAndGrad sum_of_squares_grad(const Model& model, const Tree& params, const Array& x) {
  const Tree args[] = {params};
  const int argnums[] = {0};
  return value_and_grad(
      [&](std::span<const Tree> a) {
        return sum(square(model.apply(nn::Variables{{"params", a[0]}}, x)));
      },
      args, argnums);
}

// The loss of sum_of_squares_grad as a function of (params' leaves..., x), with those
// arguments: the h that saved_residuals checkpoints for mlp_loss and block_loss.
struct LeavesLoss {
  ArrayFn fn;
  std::vector<Array> args;
};
template <class Model>
LeavesLoss sum_of_squares_of_leaves(const Model& model, const Tree& params, const Array& x) {
  LeavesLoss out;
  out.args = params.leaves();
  out.args.push_back(x);
  out.fn = [model, params](std::span<const Array> a) {
    const Tree p = params.with_leaves(a.subspan(0, a.size() - 1));
    return std::vector<Array>{sum(square(model.apply(nn::Variables{{"params", p}}, a.back())))};
  };
  return out;
}

// saved_residuals' "block_loss" from a case's inputs (problems_transformer.cpp).
LeavesLoss block_loss(const Inputs& in, const CaseContext& cx);
// saved_residuals' "conv_block_loss" from a case's inputs (problems_cnn.cpp).
LeavesLoss conv_block_loss(const Inputs& in, const CaseContext& cx);

}  // namespace flaxpp::refs
