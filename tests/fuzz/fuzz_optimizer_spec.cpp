// Fuzz target: optimiser specs (with their learning-rate schedules), as training configs and
// reference cases hold them; an optimiser read then initialises and takes three updates, so
// that its schedule runs.
#include "harness.hpp"

#include "flaxpp/io/optimizer_spec.hpp"

using namespace flaxpp;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  fuzz::with_json(data, size, [](const io::Json& spec) {
    const optim::GradientTransformation tx = io::optimizer_from_spec(spec, "optimizer");
    Tree params{{"w", Array::full(Shape{2}, 1.0, DType::f32)}};
    Tree state = tx.init(params);
    for (int i = 0; i < 3; ++i) {
      const Tree grads{{"w", Array::full(Shape{2}, 0.5, DType::f32)}};
      std::tie(params, state) =
          optim::apply_gradients(tx, grads, std::move(state), std::move(params));
    }
  });
  return 0;
}
