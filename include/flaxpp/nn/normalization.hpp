// flaxpp/nn/normalization.hpp — nn.BatchNorm, nn.RMSNorm and nn.GroupNorm as
// flax/linen/normalization.py
// computes them (_compute_stats with the fast variance E[x^2] - E[x]^2 clamped at 0, then
// _normalize: (x - mean) * (rsqrt(var + epsilon) * scale) + bias), composed from jax.numpy
// operations so that their gradients are JAX's. (nn::LayerNorm is one fused primitive:
// layer_norm.hpp.)
#pragma once

#include <optional>

#include "flaxpp/nn/scope.hpp"

namespace flaxpp::nn {

// Normalises by the batch's statistics over every axis but `axis` (training), or by the running
// averages (use_running_average). Variables "batch_stats" "mean" (zeros) and "var" (ones),
// float32, of the feature axis; each training call outside init sets them to
// momentum * running + (1 - momentum) * batch, which needs apply_mutable with "batch_stats".
// use_running_average is given here or to the call (Flax's merge_param: exactly one of them).
// axis_name (Flax's): the batch's statistics are averaged over the data-parallel job's processes
// (the mean of the processes' means and of their squared means, by the differentiable
// all_reduce primitive, as Flax's lax.pmean), so every replica normalises and updates alike;
// flaxpp's one such axis is the job's processes (dist::world()), whatever the name.
struct BatchNorm {
  static constexpr const char* name = "BatchNorm";
  std::optional<bool> use_running_average{};
  std::int64_t axis = -1;
  double momentum = 0.99;
  double epsilon = 1e-5;
  bool use_bias = true;
  bool use_scale = true;
  DType param_dtype = DType::f32;
  initializers::Initializer bias_init = initializers::zeros();
  initializers::Initializer scale_init = initializers::ones();
  std::optional<std::string> axis_name{};

  Array operator()(Scope& s, const Array& x) const;
  Array operator()(Scope& s, const Array& x, bool use_running_average) const;

 private:
  Array run(Scope& s, const Array& x, bool running) const;
};

// Normalises by the root mean square over the last axis (no mean is subtracted); scale over
// the last axis.
struct RMSNorm {
  static constexpr const char* name = "RMSNorm";
  double epsilon = 1e-6;
  bool use_scale = true;
  DType param_dtype = DType::f32;
  initializers::Initializer scale_init = initializers::ones();

  Array operator()(Scope& s, const Array& x) const;
};

// x: (batch, ..., C). The channels split into num_groups groups (or groups of group_size,
// exactly one of them given); mean and variance per example and group, over every axis but
// the first; scale and bias per channel.
struct GroupNorm {
  static constexpr const char* name = "GroupNorm";
  std::optional<std::int64_t> num_groups = 32;
  std::optional<std::int64_t> group_size{};
  double epsilon = 1e-6;
  bool use_bias = true;
  bool use_scale = true;
  DType param_dtype = DType::f32;
  initializers::Initializer bias_init = initializers::zeros();
  initializers::Initializer scale_init = initializers::ones();

  Array operator()(Scope& s, const Array& x) const;
};

}  // namespace flaxpp::nn
