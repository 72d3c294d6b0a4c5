// `flaxpp residuals FUNCTION [--policy SPEC] [--budget SIZE] [-N n] [-d d] [-T t] [-L layers]`:
// what a checkpointed function keeps between its forward and backward pass
// (jax.ad_checkpoint.print_saved_residuals), with bytes, and its peak memory during
// value_and_grad, predicted from the residuals and measured. With --budget, the jitted
// value_and_grad planned under that memory budget: the policy chosen per region, and the
// planned peak beside the measured one. stack_loss is refs-format's Stack
// (scan over Blocks, the policy applied per Block as nn.remat(Block, policy)), whose residuals
// show what a policy keeps per layer; cnn_loss is the contract's CNN (ConvBlocks remat'd by the
// policy), for the same table on convolutions.
#include <functional>
#include <iomanip>
#include <iostream>
#include <numeric>
#include <optional>

#include "cli/args.hpp"
#include "cli/commands.hpp"
#include "flaxpp/core/backend.hpp"
#include "flaxpp/io/byte_size.hpp"
#include "flaxpp/io/policy_spec.hpp"
#include "flaxpp/io/refs.hpp"
#include "flaxpp/nn/cnn.hpp"
#include "flaxpp/nn/language_model.hpp"
#include "flaxpp/ops/numpy.hpp"
#include "flaxpp/random/distributions.hpp"
#include "flaxpp/transforms/autodiff.hpp"
#include "flaxpp/transforms/checkpoint.hpp"
#include "flaxpp/transforms/jit.hpp"

namespace flaxpp::cli {
namespace {

constexpr const char* kResidualsUsage =
    "usage: flaxpp residuals FUNCTION [--policy SPEC] [--budget SIZE] [-N rows] [-d dim] [-T len]\n"
    "                         [-L layers]\n"
    "  FUNCTION: checkpoint_dot_policy  f(w1, w2, x) = sum((relu(x @ w1) @ w2) ** 2)\n"
    "            named_dot_policy       the same with checkpoint_name 'a' (x @ w1), 'b' (relu), "
    "'c'\n"
    "            stack_loss             sum(Stack(L, heads 4, mlp 4d, policy).apply(p, x) ** 2)\n"
    "                                   (the policy remats each Block; x is f32[N,T,d])\n"
    "            cnn_loss               sum(CNN(L blocks of d features, 10 classes, "
    "policy)\n"
    "                                   .apply(p, x) ** 2) (x is f32[N,T,T,3])\n"
    "  SPEC: a policy name (e.g. dots_saveable), none, or a JSON policy spec such as\n"
    "        '{\"name\": \"save_only_these_names\", \"names\": [\"a\"]}' (default "
    "nothing_saveable)\n"
    "  --budget SIZE: plan the jitted value_and_grad under this memory budget (e.g. 10MiB; its\n"
    "        peak counts the arguments and gradients): the policy chosen for every checkpoint\n"
    "        region, then `peak: planned P bytes, measured M bytes, budget B bytes`\n"
    "  -N, -d: x is f32[N,d], w1 and w2 f32[d,d] (default 5 and 4)\n"
    "  -T, -L: stack_loss's sequence length and layers, cnn_loss's image size and blocks\n"
    "          (default 8 and 4)\n";

// A function of arrays to differentiate, its inputs and their names.
struct Problem {
  ArrayFn fn;  // already checkpointed where the policy applies inside it
  std::vector<Array> inputs;
  std::vector<std::string> names;
};

// A problem of model parameters and x: the loss sum(apply(params, x) ** 2).
template <class M>
Problem model_problem(const nn::Model<M>& model, const Array& x) {
  const Tree params = model.init(random::key(0), x)["params"];
  Problem p;
  p.inputs = params.leaves();
  p.inputs.push_back(x);
  for (const auto& [path, leaf] : params.flatten())
    p.names.push_back(path);
  p.names.push_back("x");
  p.fn = [model, params](std::span<const Array> a) {
    const Tree q = params.with_leaves(a.subspan(0, a.size() - 1));
    return std::vector<Array>{sum(square(model.apply(nn::Variables{{"params", q}}, a.back())))};
  };
  return p;
}

Problem stack_problem(const PolicyPtr& policy, std::int64_t n, std::int64_t d, std::int64_t t,
                      std::int64_t layers) {
  const nn::Model stack(nn::TransformerStack{
      .num_layers = layers, .num_heads = 4, .mlp_dim = 4 * d, .policy = policy});
  return model_problem(stack, random::normal(random::key(1), Shape{n, t, d}));
}

// The default device's peak while `run` runs, counted from what was live before it, plus
// `resident_bytes`: what was live already that a plan counts (the arguments, and a jitted
// step's constants).
std::int64_t measured_peak(std::int64_t resident_bytes, const std::function<void()>& run) {
  Backend& dev = backend(default_device());
  const std::int64_t live0 = dev.memory_stats().live_bytes;
  dev.reset_peak_memory();
  run();
  return dev.memory_stats().peak_bytes - live0 + resident_bytes;
}

// The jitted value_and_grad of `p` planned under `budget`: the choice, then the planned and
// measured peak.
void print_budget_plan(const Problem& p, std::int64_t budget) {
  const ArrayFn fn = p.fn;
  const Jitted step = jit(
      [fn](std::span<const Tree> a) {
        std::vector<int> argnums(a.size());
        std::iota(argnums.begin(), argnums.end(), 0);
        const TreeLossFn loss = [&fn](std::span<const Tree> t) {
          std::vector<Array> arrays;
          for (const Tree& x : t)
            arrays.push_back(x.array());
          return fn(arrays)[0];
        };
        ValueAndGrad vg = value_and_grad(loss, a, argnums);
        std::vector<Tree> out{Tree(vg.value)};
        out.insert(out.end(), vg.grads.begin(), vg.grads.end());
        return out;
      },
      {.memory_budget = budget});
  const std::vector<Tree> args(p.inputs.begin(), p.inputs.end());
  const CompiledStep compiled = step.lower(args);
  std::cout << compiled.remat_plan()->str() << "\n";
  const std::int64_t measured =
      measured_peak(compiled.memory_analysis().resident_bytes(), [&] { (void)compiled(args); });
  std::cout << "peak: planned " << compiled.memory_analysis().peak_bytes << " bytes, measured "
            << measured << " bytes, budget " << budget << " bytes\n";
}

}  // namespace

int residuals_command(const std::vector<std::string>& args) {
  std::string function, spec = "nothing_saveable";
  std::int64_t n = 5, d = 4, t = 8, layers = 4;
  std::optional<std::int64_t> budget;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--help" || a == "-h") {
      std::cout << kResidualsUsage;
      return 0;
    } else if (a == "--policy") {
      spec = option_value(args, i);
    } else if (a == "--budget") {
      budget = io::parse_byte_size(option_value(args, i), "--budget");
    } else if (a == "-N" || a == "-d" || a == "-T" || a == "-L") {
      std::int64_t& v = a == "-N" ? n : a == "-d" ? d : a == "-T" ? t : layers;
      v = parse_int_option(a, option_value(args, i), 1, 65536);
    } else if (a.rfind("-", 0) == 0) {
      std::cerr << "flaxpp residuals: unknown option " << a << "\n" << kResidualsUsage;
      return 2;
    } else if (function.empty()) {
      function = a;
    } else {
      std::cerr << "flaxpp residuals: one function at a time\n" << kResidualsUsage;
      return 2;
    }
  }
  const PolicyPtr policy = io::policy_from_spec_text(spec);
  Problem p;
  if (function == "checkpoint_dot_policy" || function == "named_dot_policy") {
    const ArrayFn fn =
        function == "checkpoint_dot_policy" ? refs::dot_policy_f : refs::named_dot_policy_g;
    p.fn = checkpoint(fn, policy);
    p.inputs = {Array::full(Shape{d, d}, 0.5, DType::f32),
                Array::full(Shape{d, d}, -0.25, DType::f32),
                Array::full(Shape{n, d}, 1.0, DType::f32)};
    p.names = {"w1", "w2", "x"};
  } else if (function == "stack_loss") {
    if (d % 4 != 0) {
      std::cerr << "flaxpp residuals: stack_loss has 4 heads; -d must be a multiple of 4\n";
      return 2;
    }
    p = stack_problem(policy, n, d, t, layers);
  } else if (function == "cnn_loss") {
    const nn::Model cnn(
        nn::CNN{.features = std::vector<std::int64_t>(static_cast<std::size_t>(layers), d),
                .classes = 10,
                .policy = policy});
    p = model_problem(cnn, random::normal(random::key(1), Shape{n, t, t, 3}));
  } else {
    std::cerr << "flaxpp residuals: unknown function \"" << function << "\"\n" << kResidualsUsage;
    return 2;
  }

  if (budget) {
    print_budget_plan(p, *budget);
    return 0;
  }
  std::cout << function << " under "
            << (checkpoint_policies::is_none(policy) ? std::string("no checkpoint")
                                                     : policy->str());
  if (p.inputs.size() > 3) {
    std::cout << ", " << p.inputs.size() - 1 << " parameter leaves and x "
              << p.inputs.back().aval();
  } else {
    for (std::size_t k = 0; k < p.inputs.size(); ++k)
      std::cout << ", " << p.names[k] << " " << p.inputs[k].aval();
  }
  std::cout << ":\n";
  std::int64_t total = 0, new_bytes = 0, args_bytes = 0, grads = 0;
  for (const Array& x : p.inputs)
    args_bytes += x.nbytes();
  grads = args_bytes;  // one cotangent per input
  for (const SavedResidual& r : saved_residuals(p.fn, p.inputs)) {
    const std::int64_t b = r.aval.nbytes();
    total += b;
    if (r.kind != SavedResidual::Kind::argument) new_bytes += b;
    std::cout << "  " << std::left << std::setw(44) << r.str(p.names) << std::right << std::setw(12)
              << b << " bytes\n";
  }
  const std::int64_t measured = measured_peak(args_bytes, [&] {
    const VjpResult r = vjp(p.fn, p.inputs);
    const Array one = Array::full(Shape{}, 1.0, DType::f32);
    (void)r.backward(std::span<const Array>(&one, 1));
  });
  std::cout << "saved residuals: " << total << " bytes (" << new_bytes
            << " bytes besides the arguments)\n"
            << "peak during value_and_grad: predicted >= " << args_bytes + new_bytes + grads
            << " bytes (arguments + new residuals + gradients, before transients); measured "
            << measured << " bytes on cpu\n";
  return 0;
}

}  // namespace flaxpp::cli
