// nn.DenseGeneral, as flax/linen/linear.py: parameters drawn on flat shapes and reshaped, one
// dot_general with the batch axes as batch dimensions, and the bias reshaped to broadcast
// over the remaining input axes.
#include "flaxpp/nn/dense_general.hpp"

#include <algorithm>
#include <functional>
#include <numeric>

#include "flaxpp/ir/lax.hpp"
#include "flaxpp/ops/numpy.hpp"

namespace flaxpp::nn {
namespace {

using Axes = std::vector<std::int64_t>;

std::int64_t product(const Axes& dims) {
  return std::accumulate(dims.begin(), dims.end(), std::int64_t{1}, std::multiplies<>());
}

std::string axes_str(const Axes& v) {
  std::string out = "(";
  for (std::size_t i = 0; i < v.size(); ++i)
    out += detail::str(i ? ", " : "", v[i]);
  return out + ")";
}

// An initializer drawing `flat` and reshaping the draw to the shape asked for (Flax's
// kernel_init_wrap / bias_init_wrap).
initializers::Initializer reshaped(initializers::Initializer init, Shape flat) {
  return [init = std::move(init), flat = std::move(flat)](const random::Key& key,
                                                          const Shape& shape, DType dtype) {
    return reshape(init(key, flat, dtype), shape.dims());
  };
}

}  // namespace

Array DenseGeneral::operator()(Scope& s, const Array& x) const {
  const std::int64_t ndim = x.rank();
  auto fail = [&](const std::string& what) {
    throw ValueError(detail::str("DenseGeneral at ", s.path_str(), ": ", what));
  };
  if (features.empty() ||
      std::any_of(features.begin(), features.end(), [](auto f) { return f <= 0; }))
    fail(detail::str("features must be one or more sizes > 0, got ", axes_str(features)));
  if (!is_floating(x.dtype())) fail(detail::str("expected a floating-point input, got ", x.aval()));
  if (!batch_dims.empty()) {  // Flax: the set of batch_dims must be {0, 1, ..., max}
    Axes distinct = batch_dims;
    std::sort(distinct.begin(), distinct.end());
    distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
    Axes leading(distinct.size());
    std::iota(leading.begin(), leading.end(), 0);
    if (distinct != leading)
      fail(detail::str("batch_dims ", axes_str(batch_dims),
                       " must be consecutive leading dimensions starting from 0"));
  }
  // Flax's _normalize_axes: non-negative and sorted.
  auto normalized = [&](const Axes& axes, const char* what) {
    Axes out;
    for (std::int64_t a : axes) {
      const std::int64_t n = a < 0 ? a + ndim : a;
      if (n < 0 || n >= ndim)
        fail(detail::str(what, " ", axes_str(axes), " is out of range for the input ", x.aval()));
      out.push_back(n);
    }
    std::sort(out.begin(), out.end());
    if (std::adjacent_find(out.begin(), out.end()) != out.end())
      fail(detail::str(what, " ", axes_str(axes), " names an axis twice"));
    return out;
  };
  const Axes contract = normalized(axis, "axis");
  const Axes batch = normalized(batch_dims, "batch_dims");
  for (std::int64_t a : contract)
    if (std::binary_search(batch.begin(), batch.end(), a))
      fail(detail::str("axis ", a, " is both contracted and a batch dim"));

  Axes batch_shape, contract_shape, expanded;
  for (std::int64_t a : batch)
    batch_shape.push_back(x.shape()[a]);
  for (std::int64_t a : contract)
    contract_shape.push_back(x.shape()[a]);
  // The bias broadcasts over the input axes that remain: batch axes keep their size.
  for (std::int64_t a = 0; a < ndim; ++a)
    if (!std::binary_search(contract.begin(), contract.end(), a))
      expanded.push_back(std::binary_search(batch.begin(), batch.end(), a) ? x.shape()[a] : 1);

  Axes kernel_shape = batch_shape;
  kernel_shape.insert(kernel_shape.end(), contract_shape.begin(), contract_shape.end());
  kernel_shape.insert(kernel_shape.end(), features.begin(), features.end());
  const Array kernel =
      s.param("kernel",
              reshaped(kernel_init,
                       Shape{product(batch_shape) * product(contract_shape), product(features)}),
              Shape(kernel_shape), param_dtype);
  Axes bias_shape = batch_shape;
  bias_shape.insert(bias_shape.end(), features.begin(), features.end());
  const Array bias =
      use_bias
          ? s.param("bias", reshaped(bias_init, Shape{product(batch_shape) * product(features)}),
                    Shape(bias_shape), param_dtype)
          : Array();

  // promote_dtype: everything in the computation dtype (the common dtype by default).
  const DType compute = dtype.value_or(x.dtype() == param_dtype ? x.dtype() : DType::f32);
  const auto nb = static_cast<std::int64_t>(batch.size());
  Axes kernel_contract(contract.size()), kernel_batch(batch.size());
  std::iota(kernel_contract.begin(), kernel_contract.end(), nb);
  std::iota(kernel_batch.begin(), kernel_batch.end(), 0);
  Array y = lax::dot_general(astype(x, compute), astype(kernel, compute),
                             {contract, kernel_contract, batch, kernel_batch});
  if (use_bias) {
    expanded.insert(expanded.end(), features.begin(), features.end());
    y = y + reshape(astype(bias, compute), expanded);
  }
  return y;
}

}  // namespace flaxpp::nn
