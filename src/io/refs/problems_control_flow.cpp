// Reference problems of the control-flow family (docs/refs-problems.md, "Control flow"):
// cond_loss, switch_loss and fori_loss of (w, x), their values and gradients under a policy,
// and what a policy keeps inside cond's branches.
#include "flaxpp/io/refs.hpp"
#include "flaxpp/ir/lax.hpp"
#include "flaxpp/transforms/cond.hpp"
#include "flaxpp/transforms/while_loop.hpp"
#include "io/refs/problems_shared.hpp"

namespace flaxpp::refs {
namespace {

// The branches: tanh(checkpoint_name(x @ w, "h")), sin(x) * w[0] and (x @ w) @ w, of (w, x),
// with constants on `device`.
struct Branches {
  lax::Branch dense_tanh = [](std::span<const Array> o) {
    return std::vector<Array>{tanh(checkpoint_name(matmul(o[1], o[0]), "h"))};
  };
  lax::Branch sin_row;
  lax::Branch two_products = [](std::span<const Array> o) {
    return std::vector<Array>{matmul(matmul(o[1], o[0]), o[0])};
  };
  explicit Branches(Device device)
      : sin_row([device](std::span<const Array> o) {
          return std::vector<Array>{sin(o[1]) *
                                    lax::take(o[0], Array::scalar(std::int32_t{0}, device))};
        }) {}
};

// The case's function of (w, x) -> the loss, from its "function" input.
ArrayFn function_of(const Inputs& in, Device device) {
  const std::string name = in.string("function");
  const Branches b(device);
  if (name == "cond_loss")
    return [b, device](std::span<const Array> a) {
      const Array pred = greater(sum(a[1]), Array::full(Shape{}, 0.0, DType::f32, device));
      return std::vector<Array>{sum(square(lax::cond(pred, b.dense_tanh, b.sin_row, a)[0]))};
    };
  if (name == "switch_loss") {
    const std::int64_t index = in.integer("index");
    if (index < INT32_MIN || index > INT32_MAX)
      throw InputError(detail::str(in.path(), ".index: ", index, " is outside int32"));
    return [b, device, index](std::span<const Array> a) {
      const lax::Branch branches[] = {b.dense_tanh, b.sin_row, b.two_products};
      const Array i = Array::scalar(static_cast<std::int32_t>(index), device);
      return std::vector<Array>{sum(square(lax::switch_(i, branches, a)[0]))};
    };
  }
  if (name == "fori_loss") {
    const std::int64_t lower = in.integer("lower"), upper = in.integer("upper");
    for (std::int64_t bound : {lower, upper})
      if (bound < -1000000 || bound > 1000000)
        throw InputError(detail::str(in.path(), ": the bounds ", lower, " and ", upper,
                                     " must lie within +-1000000"));
    return [lower, upper](std::span<const Array> a) {
      const Array w = a[0];
      const lax::ForiBody step = [&w](const Array& i, std::span<const Array> y) {
        return std::vector<Array>{tanh(matmul(y[0], w)) + astype(i, y[0].dtype())};
      };
      const std::vector<Array> y =
          lax::fori_loop(static_cast<std::int32_t>(lower), static_cast<std::int32_t>(upper), step,
                         a.subspan(1, 1));
      return std::vector<Array>{sum(square(y[0]))};
    };
  }
  throw InputError(detail::str(in.path(), ".function: unknown function \"", name,
                               "\"; expected cond_loss, switch_loss or fori_loss"));
}

// w f32[d,d] and x f32[N,d], on the case's device.
std::vector<Array> w_and_x(const Inputs& in, const CaseContext& cx) {
  const Array w = float_input(in, "w", cx, 2), x = float_input(in, "x", cx, 2);
  const std::int64_t d = w.shape()[0];
  if (w.shape() != Shape{d, d} || x.rank() != 2 || x.shape()[1] != d)
    throw InputError(detail::str(in.path(), ": expected w f32[d,d] and x f32[N,d], got w ",
                                 w.aval(), " and x ", x.aval()));
  return {w, x};
}

// The function under the case's policy ("none": as it is).
ArrayFn with_case_policy(const Inputs& in, ArrayFn fn) {
  const PolicyPtr policy = policy_input(in);
  return checkpoint(std::move(fn), policy);
}

}  // namespace

void register_control_flow_problems(ProblemRegistry& registry) {
  registry.add("control_flow_grad", [](const Inputs& in, const CaseContext& cx) -> Outcome {
    const std::vector<Array> args = w_and_x(in, cx);
    const VjpResult r = vjp(with_case_policy(in, function_of(in, cx.device)), args);
    const Array one = Array::full(Shape{}, 1.0, DType::f32, cx.device);
    const std::vector<Array> g = r.backward(std::span<const Array>(&one, 1));
    return Tree{{"value", r.outputs[0]}, {"w", g[0]}, {"x", g[1]}};
  });
  registry.add(
      "control_flow_saved_residuals", [](const Inputs& in, const CaseContext& cx) -> Outcome {
        if (in.has("policy") && in.raw("policy") == Json("none"))
          throw InputError(detail::str(in.path(), ".policy: \"none\" is not valid here"));
        return residual_records(
            saved_residuals(with_case_policy(in, function_of(in, cx.device)), w_and_x(in, cx)));
      });
}

}  // namespace flaxpp::refs
