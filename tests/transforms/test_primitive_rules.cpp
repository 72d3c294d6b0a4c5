// The per-primitive rules the generic passes ask for (flaxpp/ir/primitive_rules.hpp,
// flaxpp/transforms/tape.hpp, flaxpp/transforms/memory_analysis.hpp), given to primitives
// defined here, outside flaxpp: a call primitive is inlined by jit, fused with the code around
// it, and run inline by the executor, as checkpoint's and custom_vjp's are; a primitive's
// effects are what it registered, and none for one that registered nothing; a higher-order
// primitive without a VJP rule is differentiated by the reverse rule it registered; a
// primitive's memory model is what memory analysis counts for it.
#include <doctest/doctest.h>

#include <memory>
#include <vector>

#include "flaxpp/core/backend.hpp"
#include "flaxpp/ir/lax.hpp"
#include "flaxpp/ir/passes.hpp"
#include "flaxpp/ir/primitive_rules.hpp"
#include "flaxpp/ops/numpy.hpp"
#include "flaxpp/transforms/autodiff.hpp"
#include "flaxpp/transforms/jit.hpp"
#include "flaxpp/transforms/memory_analysis.hpp"
#include "flaxpp/transforms/tape.hpp"
#include "flaxpp/transforms/trace.hpp"

using namespace flaxpp;

namespace {

const ir::Graph& body(const ir::Params& params) {
  return *params.get<std::shared_ptr<const ir::Graph>>("fn");
}

// The shape rule and evaluation of a primitive whose equation applies the graph in param "fn"
// to its operands.
std::vector<AVal> body_avals(std::span<const AVal>, const ir::Params& params) {
  std::vector<AVal> out;
  for (const ir::Atom& a : body(params).outvars)
    out.push_back(body(params).aval(a));
  return out;
}
std::vector<Array> run_body(std::span<const Array> in, const ir::Params& params) {
  return eval_graph(body(params), in);
}

// toy_call(fn, x...): the graph in param "fn" applied to the operands.
const ir::Primitive toy_call_p("toy_call", body_avals, {}, run_body);
const bool toy_call_registered = (ir::register_call(toy_call_p, "fn"), true);

// prim applied to `in`, with fn traced as its "fn".
std::vector<Array> bind_with_body(const ir::Primitive& prim, const ArrayFn& fn,
                                  std::span<const Array> in) {
  std::vector<AVal> avals;
  for (const Array& x : in)
    avals.push_back(x.aval());
  const ir::Params params{{"fn", std::make_shared<const ir::Graph>(make_graph(fn, avals))}};
  return ir::bind(prim, in, params);
}

std::vector<Array> toy_call(const ArrayFn& fn, std::span<const Array> in) {
  return bind_with_body(toy_call_p, fn, in);
}

const ir::Primitive toy_exchange_p("toy_exchange", [](std::span<const AVal> in, const ir::Params&) {
  return std::vector<AVal>(in.begin(), in.end());
});
const bool toy_exchange_registered =
    (ir::register_effects(toy_exchange_p, {.collective = true}), true);

// toy_inline(fn, x...): the graph in param "fn" applied to the operands, with no VJP rule of its
// own: reverse mode replays its body inline, through the reverse rule registered below.
const ir::Primitive toy_inline_p("toy_inline", body_avals, {}, run_body);

// The body's own tape: its equations' entries, run backwards.
struct InlineEntry final : transforms::TapeEntry {
  transforms::Tape tape;
  std::vector<Array> outs;
  const std::vector<Array>& outputs() const override { return outs; }
  void backward(transforms::Cotangents& cts) const override {
    for (auto it = tape.rbegin(); it != tape.rend(); ++it)
      (*it)->backward(cts);
  }
};
const bool toy_inline_registered = [] {
  transforms::register_reverse_rule(
      toy_inline_p,
      {.replay = [](const ir::Eqn& e, std::vector<Array> ins, transforms::TangentSet& tangents) {
        auto entry = std::make_unique<InlineEntry>();
        entry->outs = transforms::replay(body(e.params), ins, entry->tape, tangents);
        return std::unique_ptr<transforms::TapeEntry>(std::move(entry));
      }});
  return true;
}();

// toy_scratch(x): ones like x, computed with a scratch buffer of kScratch bytes that its
// evaluation allocates and frees; its memory model says so.
constexpr std::int64_t kScratch = 4000;
const ir::Primitive toy_scratch_p(
    "toy_scratch",
    [](std::span<const AVal> in, const ir::Params&) { return std::vector<AVal>{in[0]}; }, {},
    [](std::span<const Array> in, const ir::Params&) {
      const Array scratch = Array::full(Shape{kScratch / 4}, 0.0, DType::f32, in[0].device());
      return std::vector<Array>{Array::full(in[0].shape(), 1.0, DType::f32, in[0].device())};
    });
const bool toy_scratch_registered = [] {
  register_memory_model(toy_scratch_p, [](const ir::Graph& g, const ir::Eqn& e) {
    const std::int64_t result = g.aval(e.outputs[0]).nbytes();
    return EqnMemory{.peak = kScratch + result, .results = result};
  });
  return true;
}();

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

TEST_CASE("primitive rules: a primitive without a VJP rule is differentiated by its reverse rule") {
  CHECK(toy_inline_registered);
  const auto body_fn = [](std::span<const Array> v) {
    return std::vector<Array>{sin(v[0]) * v[1]};
  };
  const auto with_toy = [&](const Array& x) {
    const Array in[] = {x * 2.0, x};
    return sum(bind_with_body(toy_inline_p, body_fn, in)[0]);
  };
  const auto written_out = [&](const Array& x) {
    const Array in[] = {x * 2.0, x};
    return sum(body_fn(in)[0]);
  };
  const Array x = Array::from_vector(std::vector<float>{0.5f, -1.0f, 2.0f}, Shape{3});
  const auto [value, grad] = value_and_grad(with_toy)(x);
  const auto [want_value, want_grad] = value_and_grad(written_out)(x);
  CHECK(value.to_vector<float>() == want_value.to_vector<float>());
  CHECK(grad.to_vector<float>() == want_grad.to_vector<float>());
}

TEST_CASE("primitive rules: memory analysis counts what a primitive's memory model says") {
  CHECK(toy_scratch_registered);
  const Jitted f = jit([](std::span<const Tree> a) {
    const Array in[] = {a[0].array()};
    return std::vector<Tree>{Tree(ir::bind(toy_scratch_p, in, {})[0] + a[0].array())};
  });
  const std::vector<Tree> args{Tree(Array::full(Shape{256}, 3.0, DType::f32))};
  const CompiledStep step = f.lower(args);
  const MemoryAnalysis& m = step.memory_analysis();
  CAPTURE(m.str());
  CHECK(m.exact);
  CHECK(m.peak_bytes == 1024 + kScratch + 1024);  // the argument, the scratch, the ones
  Backend& be = backend(Device::cpu());
  const std::int64_t before = be.memory_stats().live_bytes;
  be.reset_peak_memory();
  const std::vector<Tree> out = step(args);
  CHECK(be.memory_stats().peak_bytes - before == m.peak_bytes - m.resident_bytes());
  CHECK(out[0].array().to_vector<float>() == std::vector<float>(256, 4.0f));
}
