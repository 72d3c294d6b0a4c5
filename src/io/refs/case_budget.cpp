// Memory estimates of reference cases, and the case's time limit (CaseContext::check_time).
#include "io/refs/case_budget.hpp"

#include "flaxpp/core/host_memory.hpp"

namespace flaxpp::refs {
namespace {
// Float32 elements, and the arrays of an MLP layer's size alive at once while it runs forward
// and backward (measured: about 3; the estimates stay on the safe side of it).
constexpr double kFloatBytes = 4, kActivationCopies = 4;

// A count held as a double, in digits while they are exact ("6000000000"), else "6e+18".
std::string count_text(double n) {
  return n < 0x1p53 ? std::to_string(static_cast<std::int64_t>(n)) : detail::str(n);
}
}  // namespace

void CaseContext::check_time() const {
  if (std::chrono::steady_clock::now() > deadline)
    throw CaseTimeout("the case ran past its time limit and was stopped");
}

void check_case_memory(double bytes, const std::string& input, const std::string& what) {
  if (const auto shortfall = host_memory_shortfall(bytes))
    throw InputError(detail::str(input, ": ", what, " ", *shortfall,
                                 "; make the case smaller, or free memory (flaxpp check runs "
                                 "each case in the host memory it finds available)"));
}

std::int64_t positive_integer(const Inputs& in, std::string_view key) {
  const std::int64_t v = in.integer(key);
  if (v < 1)
    throw InputError(detail::str(in.path(), ".", key, ": expected an integer >= 1, got ", v));
  return v;
}

std::vector<std::int64_t> mlp_features(const Inputs& in) {
  std::vector<std::int64_t> f = in.int_list("features");
  if (f.empty())
    throw InputError(detail::str(in.path(), ".features: expected a non-empty list of layer sizes"));
  for (std::int64_t v : f)
    if (v < 1)
      throw InputError(detail::str(in.path(), ".features: layer sizes must be >= 1, got ", v));
  return f;
}

void check_mlp_memory(const Inputs& in, std::int64_t in_features,
                      std::span<const std::int64_t> features, std::int64_t rows,
                      double param_copies) {
  double params = 0, activations = 0, fan_in = static_cast<double>(in_features);
  for (const std::int64_t f : features) {
    params += (fan_in + 1) * static_cast<double>(f);
    activations += static_cast<double>(rows) * static_cast<double>(f);
    fan_in = static_cast<double>(f);
  }
  check_case_memory(kFloatBytes * (param_copies * params + kActivationCopies * activations),
                    in.path() + ".features",
                    detail::str("an MLP of ", count_text(params), " parameters on ", rows,
                                " rows of ", in_features, " features"));
}

void check_mlp_memory(const Inputs& in, const Array& x, std::span<const std::int64_t> features,
                      double param_copies) {
  const std::int64_t in_features = x.rank() > 0 ? x.shape()[x.rank() - 1] : 1;
  check_mlp_memory(in, in_features, features, in_features > 0 ? x.size() / in_features : 0,
                   param_copies);
}

}  // namespace flaxpp::refs
