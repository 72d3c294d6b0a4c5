// Remat by budget (JitOptions::memory_budget): for every checkpoint region jit chooses what the
// backward pass keeps, with the least modeled recomputation time whose planned peak fits. The
// guarantees: the measured peak equals the planned one and is within the budget; a smaller
// budget never gives a larger peak nor less recomputation; the step's results equal the plain
// step's; a budget below every candidate's peak is an error naming the least; a budget at or
// above the keep-everything peak keeps everything; at a named policy's own peak the choice is
// modeled no slower than the policy, and faster where the policy keeps cheap values.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <regex>
#include <string>
#include <vector>

#include "flaxpp/ir/cost_model.hpp"
#include "flaxpp/nn/language_model.hpp"
#include "flaxpp/ops/numpy.hpp"
#include "flaxpp/optim/transform.hpp"
#include "flaxpp/transforms/autodiff.hpp"
#include "flaxpp/transforms/jit.hpp"
#include "harness/close.hpp"
#include "harness/finite_diff.hpp"
#include "harness/planned_peak.hpp"
#include "harness/remat_stack.hpp"
#include "harness/stack_train_step.hpp"

using namespace flaxpp;
using flaxpp::testing::StackTrainStep;
namespace cp = flaxpp::checkpoint_policies;

namespace {

constexpr std::int64_t kLayers = 4;

// An Adam train step of the remat stack (each layer its own region under `policy`), its
// parameters and optimiser state donated.
Jitted mlp_step(const Array& x, const PolicyPtr& policy, std::int64_t budget) {
  const ArrayFn loss = testing::remat_stack_loss(x, kLayers, policy);
  const optim::GradientTransformation tx = optim::adam(1e-3);
  return jit(
      [loss, tx](std::span<const Tree> a) {
        auto [value, grads] =
            value_and_grad([&](const Tree& params) { return loss(params.leaves())[0]; })(a[0]);
        auto [params, state] = optim::apply_gradients(tx, std::move(grads), a[1], a[0]);
        return std::vector<Tree>{params, state, Tree(value)};
      },
      {.donate_argnums = {0, 1}, .memory_budget = budget});
}

std::vector<Tree> mlp_args(const Array& x) {
  std::vector<std::pair<std::string, Tree>> items;
  const std::int64_t width = x.shape()[1];
  for (std::int64_t l = 0; l < kLayers; ++l) {
    // Keys in leaf order: w0 b0 w1 b1 ... as remat_stack_loss reads them.
    items.emplace_back(
        detail::str("p", 2 * l),
        astype(testing::random_f64(Shape{width, width}, static_cast<unsigned>(10 + l)),
               DType::f32));
    items.emplace_back(
        detail::str("p", 2 * l + 1),
        astype(testing::random_f64(Shape{width}, static_cast<unsigned>(20 + l)), DType::f32));
  }
  const Tree params = Tree::from_items(std::move(items));
  return {params, optim::adam(1e-3).init(params), Tree(x)};
}

std::vector<Array> leaves_of(const std::vector<Tree>& trees) {
  std::vector<Array> out;
  for (const Tree& t : trees)
    for (const Array& a : t.leaves())
      out.push_back(astype(a, DType::f64));
  return out;
}

// The least planned peak a ValueError of `step` names.
std::int64_t least_peak_named(const Jitted& step, const std::vector<Tree>& args) {
  try {
    (void)step.lower(args);
  } catch (const ValueError& e) {
    std::smatch m;
    const std::string what = e.what();
    REQUIRE(std::regex_search(what, m, std::regex("least planned peak is ([0-9]+) bytes")));
    return std::stoll(m[1].str());
  }
  FAIL("expected a ValueError for a budget no choice fits");
  return 0;
}

}  // namespace

TEST_CASE(
    "remat by budget: a sweep of budgets over a stack of remat'd layers keeps its "
    "guarantees") {
  const Array x = astype(testing::random_f64(Shape{64, 48}, 1), DType::f32);
  // Fresh arguments for every call: the step donates its parameters and optimiser state.
  const std::vector<Tree> args = mlp_args(x);
  const std::vector<Array> plain = leaves_of(mlp_step(x, cp::none(), 0)(mlp_args(x)));

  // A budget at or above the keep-everything peak keeps everything: nothing is recomputed.
  const CompiledStep roomy = mlp_step(x, cp::nothing_saveable(), std::int64_t{1} << 40).lower(args);
  const RematPlan* top = roomy.remat_plan();
  REQUIRE(top != nullptr);
  CAPTURE(top->str());
  REQUIRE(top->regions.size() == kLayers);
  for (const RematPlan::Region& r : top->regions) {
    CHECK(r.policy == "everything_saveable");
    CHECK(r.own_policy == "nothing_saveable");
    // The report names what is kept: a layer's product and activation, each with its size
    // and what recomputing it would cost.
    REQUIRE(!r.kept.empty());
    for (const RematPlan::Kept& k : r.kept) {
      CHECK(k.bytes > 0);
      CHECK(k.flops > 0);
      CHECK(k.aval.starts_with("f32[64,48]"));
    }
  }
  CHECK(top->str().find("keeps ") != std::string::npos);
  CHECK(top->recompute_flops == 0);
  CHECK(top->planned_peak_bytes == top->keep_all_peak_bytes);
  CHECK(top->candidates > 4);

  // Below the least planned peak: an error naming it; at it, a plan.
  const std::int64_t least = least_peak_named(mlp_step(x, cp::nothing_saveable(), 1), args);
  CHECK(least < top->keep_all_peak_bytes);
  CHECK(top->least_peak_bytes == least);

  std::int64_t last_peak = top->keep_all_peak_bytes;
  double last_seconds = 0;
  const int steps = 12;
  for (int i = 0; i <= steps; ++i) {
    const std::int64_t budget =
        top->keep_all_peak_bytes - (top->keep_all_peak_bytes - least) * i / steps;
    CAPTURE(budget);
    const Jitted step = mlp_step(x, cp::nothing_saveable(), budget);
    const CompiledStep compiled = step.lower(args);
    const RematPlan& plan = *compiled.remat_plan();
    CAPTURE(plan.str());
    CHECK(plan.exact);
    CHECK(plan.planned_peak_bytes == compiled.memory_analysis().peak_bytes);
    CHECK(plan.planned_peak_bytes <= budget);
    // Monotonic: a smaller budget, never a larger peak nor less (modeled) recomputation.
    CHECK(plan.planned_peak_bytes <= last_peak);
    CHECK(plan.recompute_seconds() >= last_seconds);
    last_peak = plan.planned_peak_bytes;
    last_seconds = plan.recompute_seconds();
    std::vector<Tree> run = mlp_args(x);
    CHECK(testing::measured_peak(compiled, run, {}) == plan.planned_peak_bytes);
    testing::check_close(leaves_of(step(mlp_args(x))), plain, 1e-5);
  }
  CHECK(last_peak == least);
  CHECK(last_seconds > 0);
  // At the least peak no layer keeps more than when it keeps everything, and the layers keep
  // less in all (a layer whose values are not live at the peak may keep them at no cost).
  const CompiledStep tightest = mlp_step(x, cp::nothing_saveable(), least).lower(args);
  CAPTURE(tightest.remat_plan()->str());
  std::int64_t kept = 0, kept_at_top = 0;
  for (std::size_t i = 0; i < kLayers; ++i) {
    CAPTURE(i);
    CHECK(tightest.remat_plan()->regions[i].kept_bytes() <= top->regions[i].kept_bytes());
    kept += tightest.remat_plan()->regions[i].kept_bytes();
    kept_at_top += top->regions[i].kept_bytes();
  }
  CHECK(kept < kept_at_top);
}

TEST_CASE("remat by budget: a scanned body is one region, its choice planned exactly") {
  const Array x = astype(testing::random_f64(Shape{2, 8, 16}, 3), DType::f32);
  const nn::TransformerStack config{
      .num_layers = 3, .num_heads = 2, .mlp_dim = 32, .policy = cp::nothing_saveable()};
  const auto step_with = [&](std::int64_t budget) {
    return testing::stack_train_step(config, x, budget).step;
  };
  const std::vector<Tree> args = testing::stack_train_step(config, x).args;
  const std::int64_t least = least_peak_named(step_with(1), args);
  const CompiledStep roomy = step_with(std::int64_t{1} << 40).lower(args);
  REQUIRE(roomy.remat_plan() != nullptr);
  CAPTURE(roomy.remat_plan()->str());
  CHECK(roomy.remat_plan()->regions.size() == 1);
  CHECK(roomy.remat_plan()->regions[0].policy == "everything_saveable");
  CHECK(least < roomy.remat_plan()->keep_all_peak_bytes);
  const CompiledStep tight = step_with(least).lower(args);
  CAPTURE(tight.remat_plan()->str());
  CHECK(tight.remat_plan()->planned_peak_bytes == least);
  CHECK(tight.remat_plan()->recompute_flops > 0);
  // The one region's report: what each layer keeps, less at the least peak; the products
  // among what keeping everything keeps.
  const RematPlan::Region& all = roomy.remat_plan()->regions[0];
  CHECK(tight.remat_plan()->regions[0].kept_bytes() < all.kept_bytes());
  CHECK(std::any_of(all.kept.begin(), all.kept.end(),
                    [](const RematPlan::Kept& k) { return k.primitive == "tanh"; }));
  testing::check_planned_peak(tight, args, {0, 1});

  // A named policy's own planned peak as the budget: a choice that fits it and recomputes no
  // more than that policy does (the named policies are candidates), by the modeled time the
  // choice is made by; less where the policy keeps values that are cheap to recompute, which
  // only a choice of value classes finds. Its step's results are those of the step as declared.
  const ir::CostModel model = ir::CostModel::of(DeviceKind::cpu);
  const double keep_all_seconds = roomy.remat_plan()->keep_all_modeled_seconds;
  CHECK(keep_all_seconds == ir::modeled_seconds(roomy.graph(), model));
  const StackTrainStep plain = testing::stack_train_step(config, x);
  const std::vector<Array> plain_results = leaves_of(plain.step(plain.args));
  int faster = 0;
  for (const PolicyPtr& named :
       {cp::dots_saveable(), cp::dots_with_no_batch_dims_saveable(), cp::nothing_saveable()}) {
    CAPTURE(named->str());
    nn::TransformerStack declared = config;
    declared.policy = named;
    // Fresh arguments: the check above donated these.
    const std::vector<Tree> fresh = testing::stack_train_step(config, x).args;
    const CompiledStep own = testing::stack_train_step(declared, x).step.lower(fresh);
    const std::int64_t budget = own.memory_analysis().peak_bytes;
    const CompiledStep chosen = step_with(budget).lower(fresh);
    const RematPlan& plan = *chosen.remat_plan();
    CAPTURE(plan.str());
    CHECK(plan.planned_peak_bytes <= budget);
    const double named_seconds =
        std::max(0.0, ir::modeled_seconds(own.graph(), model) - keep_all_seconds);
    CHECK(plan.recompute_seconds() <= named_seconds);
    if (plan.recompute_seconds() < named_seconds) {
      ++faster;
      CHECK(plan.regions[0].policy.starts_with("lambda prim, *avals, **_: (prim.name, tuple("));
    }
    testing::check_close(leaves_of(step_with(budget)(testing::stack_train_step(config, x).args)),
                         plain_results, 1e-5);
  }
  CHECK(faster >= 1);
}

TEST_CASE("remat by budget: a step without checkpoint regions has nothing to choose") {
  const Array x = astype(testing::random_f64(Shape{8, 16}, 4), DType::f32);
  const std::vector<Tree> args = mlp_args(x);
  const CompiledStep fits = mlp_step(x, cp::none(), std::int64_t{1} << 40).lower(args);
  CHECK(fits.remat_plan()->regions.empty());
  CHECK(fits.remat_plan()->recompute_flops == 0);
  try {
    (void)mlp_step(x, cp::none(), 1024).lower(args);
    FAIL("expected a ValueError");
  } catch (const ValueError& e) {
    const std::string what = e.what();
    CHECK(what.find("no checkpoint regions") != std::string::npos);
    CHECK(what.find("budget of 1024 bytes") != std::string::npos);
  }
}
