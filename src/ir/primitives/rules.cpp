// Shape-rule helpers for the primitive definitions.
#include "rules.hpp"

#include <algorithm>
#include <numeric>

namespace flaxpp::lax::rules {

void fail(const std::string& prim, const std::string& message) {
  throw ValueError(prim + ": " + message);
}

std::string avals_str(std::span<const AVal> in) {
  std::string out;
  for (std::size_t i = 0; i < in.size(); ++i)
    out += detail::str(i ? ", " : "", in[i]);
  return out;
}

std::string list_str(const std::vector<std::int64_t>& values) {
  std::string out = "[";
  for (std::size_t i = 0; i < values.size(); ++i)
    out += detail::str(i ? ", " : "", values[i]);
  return out + "]";
}

std::int64_t dilate(std::int64_t size, std::int64_t dilation) {
  return size == 0 ? 0 : 1 + dilation * (size - 1);
}

Padding padding_of(const ir::Params& params) {
  const auto& low = params.get<std::vector<std::int64_t>>("padding_low");
  const auto& high = params.get<std::vector<std::int64_t>>("padding_high");
  Padding out;
  for (std::size_t i = 0; i < low.size(); ++i)
    out.emplace_back(low[i], high[i]);
  return out;
}

ir::Params with_padding(const ir::Params& params, const Padding& padding) {
  std::vector<std::int64_t> low, high;
  for (const auto& [lo, hi] : padding) {
    low.push_back(lo);
    high.push_back(hi);
  }
  return with_param(with_param(params, "padding_low", std::move(low)), "padding_high",
                    std::move(high));
}

void expect_arity(const std::string& prim, std::span<const AVal> in, std::size_t n) {
  if (in.size() != n) fail(prim, detail::str("expected ", n, " operands, got ", in.size()));
}

AVal binary(const std::string& prim, std::span<const AVal> in, bool comparison) {
  expect_arity(prim, in, 2);
  if (in[0].dtype == DType::bool_ && !comparison)
    fail(prim, detail::str("arithmetic on bool operands is not defined, got ", avals_str(in),
                           "; convert them to a numeric dtype first"));
  if (in[0].dtype != in[1].dtype)
    fail(prim,
         detail::str("operands must have the same dtype, got ", avals_str(in),
                     "; convert one with convert_element_type (or use the promoting flaxpp ops)"));
  if (in[0].shape == in[1].shape || in[1].shape.rank() == 0) return in[0];
  if (in[0].shape.rank() == 0) return in[1];
  fail(prim,
       detail::str("operands must have equal shapes (or one 0-d), got ", avals_str(in),
                   "; broadcast first with broadcast_in_dim (or use the broadcasting flaxpp ops)"));
}

void expect_floating(const std::string& prim, const AVal& a) {
  if (!is_floating(a.dtype)) fail(prim, detail::str("expected a floating-point operand, got ", a));
}

Array unbroadcast(const Array& ct, const AVal& operand) {
  if (!ct.valid() || ct.shape() == operand.shape) return ct;
  FLAXPP_ASSERT(operand.shape.rank() == 0, "unbroadcast to ", operand, " from ", ct.aval());
  std::vector<std::int64_t> axes(static_cast<std::size_t>(ct.rank()));
  std::iota(axes.begin(), axes.end(), 0);
  return reduce_sum(ct, axes);
}

}  // namespace flaxpp::lax::rules

namespace flaxpp::lax::rules {

std::vector<std::int64_t> past_batch_axis(std::vector<std::int64_t> axes) {
  for (std::int64_t& a : axes)
    ++a;
  return axes;
}

std::vector<std::int64_t> prefixed(std::int64_t first, const std::vector<std::int64_t>& values) {
  std::vector<std::int64_t> out{first};
  out.insert(out.end(), values.begin(), values.end());
  return out;
}

ir::Params with_param(const ir::Params& params, std::string name, ir::ParamValue value) {
  ir::Params out = params;
  out.set(std::move(name), std::move(value));
  return out;
}

ir::BatchRule batch_elementwise(std::size_t scalar_operands) {
  return [scalar_operands](const ir::BatchArgs& a) {
    // One example's shape: that of its operands that are not 0-d (they agree).
    Shape example;
    for (std::size_t i = 0; i < a.inputs.size(); ++i) {
      const auto& dims = a.inputs[i].shape().dims();
      const std::vector<std::int64_t> one(dims.begin() + (a.batched[i] ? 1 : 0), dims.end());
      if (!one.empty()) example = Shape(one);
    }
    const Shape batch(prefixed(a.size, example.dims()));
    std::vector<Array> operands;
    for (std::size_t i = 0; i < a.inputs.size(); ++i) {
      const Array& x = a.inputs[i];
      if (a.batched[i]) {
        // Batched, 0-d for each example: broadcast along the example's axes.
        operands.push_back(x.rank() == 1 && example.rank() > 0 ? broadcast_in_dim(x, batch, {0})
                                                               : x);
      } else if (x.rank() == 0 && i < scalar_operands) {
        operands.push_back(x);
      } else {
        std::vector<std::int64_t> dims(static_cast<std::size_t>(x.rank()));
        std::iota(dims.begin(), dims.end(), batch.rank() - x.rank());
        operands.push_back(broadcast_in_dim(x, batch, std::move(dims)));
      }
    }
    std::vector<Array> out = ir::bind(a.prim, operands, a.params);
    return ir::BatchedResults{out, std::vector<bool>(out.size(), true)};
  };
}

ir::BatchRule batch_every_operand(std::function<ir::Params(const ir::BatchArgs&)> batched_params) {
  return [batched_params = std::move(batched_params)](const ir::BatchArgs& a) {
    std::vector<Array> operands;
    for (std::size_t i = 0; i < a.inputs.size(); ++i)
      operands.push_back(ir::with_batch_axis(a.inputs[i], a.batched[i], a.size));
    std::vector<Array> out = ir::bind(a.prim, operands, batched_params(a));
    return ir::BatchedResults{out, std::vector<bool>(out.size(), true)};
  };
}

ir::BatchRule batch_along_axes(std::vector<std::string> axis_params) {
  return batch_every_operand([axis_params = std::move(axis_params)](const ir::BatchArgs& a) {
    ir::Params params;
    for (const auto& [name, value] : a.params.items()) {
      const bool axes =
          std::find(axis_params.begin(), axis_params.end(), name) != axis_params.end();
      if (const auto* list = std::get_if<std::vector<std::int64_t>>(&value); axes && list) {
        params.set(name, past_batch_axis(*list));
      } else if (const auto* axis = std::get_if<std::int64_t>(&value); axes && axis) {
        params.set(name, *axis + 1);
      } else {
        params.set(name, value);
      }
    }
    return params;
  });
}

}  // namespace flaxpp::lax::rules
