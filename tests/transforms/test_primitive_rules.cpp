// The per-primitive rules the generic passes ask for (flaxpp/ir/primitive_rules.hpp), given to
// primitives defined here, outside flaxpp: a call primitive is inlined by jit, fused with the
// code around it, and run inline by the executor, as checkpoint's and custom_vjp's are; a
// primitive's effects are what it registered, and none for one that registered nothing.
#include <doctest/doctest.h>

#include <memory>
#include <vector>

#include "flaxpp/ir/lax.hpp"
#include "flaxpp/ir/passes.hpp"
#include "flaxpp/ir/primitive_rules.hpp"
#include "flaxpp/ops/numpy.hpp"
#include "flaxpp/transforms/jit.hpp"
#include "flaxpp/transforms/trace.hpp"

using namespace flaxpp;

namespace {

const ir::Graph& body(const ir::Params& params) {
  return *params.get<std::shared_ptr<const ir::Graph>>("fn");
}

// toy_call(fn, x...): the graph in param "fn" applied to the operands.
const ir::Primitive toy_call_p(
    "toy_call",
    [](std::span<const AVal>, const ir::Params& params) {
      std::vector<AVal> out;
      for (const ir::Atom& a : body(params).outvars)
        out.push_back(body(params).aval(a));
      return out;
    },
    {},
    [](std::span<const Array> in, const ir::Params& params) {
      return eval_graph(body(params), in);
    });
const bool toy_call_registered = (ir::register_call(toy_call_p, "fn"), true);

std::vector<Array> toy_call(const ArrayFn& fn, std::span<const Array> in) {
  std::vector<AVal> avals;
  for (const Array& x : in)
    avals.push_back(x.aval());
  const ir::Params params{{"fn", std::make_shared<const ir::Graph>(make_graph(fn, avals))}};
  return ir::bind(toy_call_p, in, params);
}

const ir::Primitive toy_exchange_p("toy_exchange", [](std::span<const AVal> in, const ir::Params&) {
  return std::vector<AVal>(in.begin(), in.end());
});
const bool toy_exchange_registered =
    (ir::register_effects(toy_exchange_p, {.collective = true}), true);

}  // namespace

TEST_CASE("primitive rules: a call defined outside flaxpp is inlined and fused by jit") {
  CHECK(toy_call_registered);
  REQUIRE(ir::call_body(toy_call_p) != nullptr);
  CHECK(*ir::call_body(toy_call_p) == "fn");
  CHECK(ir::call_body(lax::add_p) == nullptr);
  const auto f = [](std::span<const Tree> a) {
    const Array x = a[0].array();
    const Array in[] = {x * 3.0};
    const Array y = toy_call(
        [](std::span<const Array> v) { return std::vector<Array>{exp(v[0]) + 1.0}; }, in)[0];
    return std::vector<Tree>{Tree(y * 0.5)};
  };
  const std::vector<Tree> args{
      Tree(Array::from_vector(std::vector<float>{0.5f, -1.0f, 2.0f}, Shape{3}))};
  const Jitted jitted = jit(f);
  const CompiledStep step = jitted.lower(args);
  CAPTURE(step.graph().str());
  CHECK(ir::count_eqns(step.graph(), toy_call_p) == 0);
  CHECK(ir::count_eqns(step.graph(), lax::fused_elementwise_p) == 1);     // mul, exp, add, mul
  const std::vector<float> want = f(args)[0].array().to_vector<float>();  // eager: the impl
  CHECK(jitted(args)[0].array().to_vector<float>() == want);
}

TEST_CASE("primitive rules: effects are what the primitive registered, none by default") {
  CHECK(toy_exchange_registered);
  CHECK(ir::effects_of(toy_exchange_p).collective);
  CHECK_FALSE(ir::effects_of(toy_exchange_p).async_half);
  CHECK_FALSE(ir::effects_of(lax::add_p).collective);
  const ir::Eqn e{&toy_exchange_p, {}, {}, {}};
  CHECK(ir::is_collective(e));
}
