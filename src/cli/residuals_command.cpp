// `flaxpp residuals FUNCTION [--policy SPEC] [-N n] [-d d]`: what a checkpointed function keeps
// between its forward and backward pass (jax.ad_checkpoint.print_saved_residuals), with bytes,
// and its peak memory during value_and_grad, predicted from the residuals and measured.
#include <iomanip>
#include <iostream>

#include "cli/args.hpp"
#include "cli/commands.hpp"
#include "flaxpp/core/backend.hpp"
#include "flaxpp/io/policy_spec.hpp"
#include "flaxpp/io/refs.hpp"
#include "flaxpp/transforms/autodiff.hpp"
#include "flaxpp/transforms/checkpoint.hpp"

namespace flaxpp::cli {
namespace {

constexpr const char* kResidualsUsage =
    "usage: flaxpp residuals FUNCTION [--policy SPEC] [-N rows] [-d dim]\n"
    "  FUNCTION: checkpoint_dot_policy  f(w1, w2, x) = sum((relu(x @ w1) @ w2) ** 2)\n"
    "            named_dot_policy       the same with checkpoint_name 'a' (x @ w1), 'b' (relu), "
    "'c'\n"
    "  SPEC: a policy name (e.g. dots_saveable), none, or a JSON policy spec such as\n"
    "        '{\"name\": \"save_only_these_names\", \"names\": [\"a\"]}' (default "
    "nothing_saveable)\n"
    "  -N, -d: x is f32[N,d], w1 and w2 f32[d,d] (default 5 and 4)\n";

std::int64_t bytes_of(const AVal& a) {
  return a.shape.size() * static_cast<std::int64_t>(itemsize(a.dtype));
}

}  // namespace

int residuals_command(const std::vector<std::string>& args) {
  std::string function, spec = "nothing_saveable";
  std::int64_t n = 5, d = 4;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--help" || a == "-h") {
      std::cout << kResidualsUsage;
      return 0;
    } else if (a == "--policy") {
      spec = option_value(args, i);
    } else if (a == "-N" || a == "-d") {
      (a == "-N" ? n : d) = parse_int_option(a, option_value(args, i), 1, 65536);
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
  ArrayFn fn;
  if (function == "checkpoint_dot_policy") {
    fn = refs::dot_policy_f;
  } else if (function == "named_dot_policy") {
    fn = refs::named_dot_policy_g;
  } else {
    std::cerr << "flaxpp residuals: unknown function \"" << function << "\"\n" << kResidualsUsage;
    return 2;
  }
  const std::optional<PolicyPtr> policy = io::policy_from_spec_text(spec);
  const ArrayFn h = policy ? checkpoint(fn, *policy) : fn;
  const std::vector<Array> inputs{Array::full(Shape{d, d}, 0.5, DType::f32),
                                  Array::full(Shape{d, d}, -0.25, DType::f32),
                                  Array::full(Shape{n, d}, 1.0, DType::f32)};
  const std::string names[] = {"w1", "w2", "x"};

  std::cout << function << " under " << (policy ? (*policy)->str() : std::string("no checkpoint"))
            << ", w1 " << inputs[0].aval() << ", w2 " << inputs[1].aval() << ", x "
            << inputs[2].aval() << ":\n";
  std::int64_t total = 0, new_bytes = 0, args_bytes = 0, grads = 0;
  for (const Array& x : inputs)
    args_bytes += x.nbytes();
  grads = args_bytes;  // one cotangent per input
  for (const SavedResidual& r : saved_residuals(h, inputs)) {
    const std::int64_t b = bytes_of(r.aval);
    total += b;
    if (r.kind != SavedResidual::Kind::argument) new_bytes += b;
    std::cout << "  " << std::left << std::setw(44) << r.str(names) << std::right << std::setw(12)
              << b << " bytes\n";
  }
  Backend& dev = backend(default_device());
  const std::int64_t live0 = dev.memory_stats().live_bytes;
  dev.reset_peak_memory();
  {
    const VjpResult r = vjp(h, inputs);
    const Array one = Array::full(Shape{}, 1.0, DType::f32);
    (void)r.backward(std::span<const Array>(&one, 1));
  }
  const std::int64_t measured = dev.memory_stats().peak_bytes - live0 + args_bytes;
  std::cout << "saved residuals: " << total << " bytes (" << new_bytes
            << " bytes besides the arguments)\n"
            << "peak during value_and_grad: predicted >= " << args_bytes + new_bytes + grads
            << " bytes (arguments + new residuals + gradients, before transients); measured "
            << measured << " bytes on cpu\n";
  return 0;
}

}  // namespace flaxpp::cli
