// Fuzz target: policy specs, as `flaxpp residuals --policy TEXT` reads them
// (policy_from_spec_text) and as configs and reference cases hold them (policy_from_spec on a
// JSON value); a policy read is then asked about every equation of the remat seed problem.
#include "harness.hpp"

#include "flaxpp/io/policy_spec.hpp"
#include "flaxpp/io/refs.hpp"
#include "flaxpp/transforms/autodiff.hpp"
#include "flaxpp/transforms/checkpoint.hpp"

using namespace flaxpp;

namespace {
void use(const PolicyPtr& policy) {
  if (checkpoint_policies::is_none(policy)) return;
  const std::vector<Array> args = {Array::full(Shape{3, 3}, 0.5, DType::f32),
                                   Array::full(Shape{3, 3}, -0.25, DType::f32),
                                   Array::full(Shape{2, 3}, 1.0, DType::f32)};
  saved_residuals(checkpoint(refs::named_dot_policy_g, policy), args);
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  fuzz::expect_read_or_refused(
      [&] { use(io::policy_from_spec_text(std::string(fuzz::bytes_of(data, size)))); });
  fuzz::with_json(data, size,
                  [](const io::Json& spec) { use(io::policy_from_spec(spec, "policy")); });
  return 0;
}
