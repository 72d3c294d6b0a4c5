// TrainState and the compiled classifier step.
#include "flaxpp/train/train_state.hpp"

#include "flaxpp/nn/remat.hpp"
#include "flaxpp/ops/numpy.hpp"
#include "flaxpp/optim/losses.hpp"

namespace flaxpp::train {
namespace {

// A 0-d result on the host as float (a bf16 model's loss is bf16).
float host_float(const Array& x) {
  return astype(x, DType::f32).to_vector<float>()[0];
}

}  // namespace

Tree TrainState::to_tree() const {
  return Tree{{"params", params},
              {"opt_state", opt_state},
              {"step", Array::scalar(static_cast<std::int32_t>(step))}};
}

TrainState TrainState::from_tree(const Tree& tree) {
  for (const char* key : {"params", "opt_state", "step"})
    if (!tree.contains(key))
      throw ValueError(
          detail::str("a train-state checkpoint needs \"params\", \"opt_state\" and \"step\"; \"",
                      key, "\" is missing"));
  return {tree["params"], tree["opt_state"], tree["step"].array().to_vector<std::int32_t>()[0]};
}

ApplyFn mlp_apply(const nn::MLP& mlp, const std::optional<PolicyPtr>& policy) {
  auto apply_of = [](const auto& model) -> ApplyFn {
    return [model](const Tree& params, const Array& x) {
      return model.apply(nn::Variables{{"params", params}}, x);
    };
  };
  return policy ? apply_of(remat<nn::MLP>(*policy)(mlp)) : apply_of(nn::Model(mlp));
}

float ClassifierStep::operator()(TrainState& state, const Array& x, const Array& y) {
  std::vector<Array> inputs = state.params.leaves();
  const std::size_t n = inputs.size();
  // Data sets live in host memory: the batch goes where the parameters are, once.
  const Device device = n > 0 ? inputs.front().device() : x.device();
  inputs.push_back(x.to(device));
  inputs.push_back(y.to(device));
  std::string key;
  for (const Array& a : inputs)
    key += a.aval().str() + ";";
  auto it = compiled_.find(key);
  if (it == compiled_.end()) {
    const Tree structure = state.params;
    const ApplyFn apply = apply_;
    const ArrayFn loss = [structure, apply, n](std::span<const Array> in) {
      const Tree params = structure.with_leaves(in.subspan(0, n));
      return std::vector<Array>{
          mean(optim::softmax_cross_entropy_with_integer_labels(apply(params, in[n]), in[n + 1]))};
    };
    std::vector<AVal> avals;
    for (const Array& a : inputs)
      avals.push_back(a.aval());
    std::vector<bool> differentiable(inputs.size(), true);
    differentiable[n] = differentiable[n + 1] = false;  // the batch
    it = compiled_.emplace(key, CompiledVjp(loss, avals, differentiable)).first;
  }
  VjpResult r = it->second(inputs);
  inputs.clear();
  // The loss's cotangent, made once (not a host-to-device copy per step).
  const AVal loss_aval = r.outputs[0].aval();
  if (!seed_.valid() || seed_.aval() != loss_aval || seed_.device() != r.outputs[0].device())
    seed_ = Array::full(Shape{}, 1.0, loss_aval.dtype, r.outputs[0].device());
  const std::span<const Array> seed(&seed_, 1);
  // On the CPU each leaf is updated as soon as its gradient is final, so the gradients never
  // all exist at once (XLA's schedule of a jitted step). On a GPU one fused pass per dtype
  // updates every leaf (one kernel launch, not one per parameter).
  std::unique_ptr<optim::LeafwiseApply> leafwise;
  if (device.kind == DeviceKind::cpu)
    leafwise = optim::LeafwiseApply::start(tx_, state.opt_state, state.params);
  // Gradients, parameters and optimiser state are given up to the update, so the new values
  // take the old ones' buffers where nothing else holds them (donation). A step that fails
  // part-way therefore leaves `state` without them, as JAX's donated arrays are deleted.
  try {
    if (leafwise) {
      state.params = Tree();
      state.opt_state = Tree();
      r.backward_into(seed, [&](std::size_t i, Array ct) {
        if (i < n) leafwise->apply(i, std::move(ct));
      });
      std::tie(state.params, state.opt_state) = leafwise->finish();
    } else {
      std::vector<Array> cts = r.backward_once(seed);
      cts.resize(n);
      Tree grads = state.params.with_leaves(cts);
      cts.clear();
      std::tie(state.params, state.opt_state) = optim::apply_gradients(
          tx_, std::move(grads), std::move(state.opt_state), std::move(state.params));
    }
  } catch (...) {
    state.params = Tree();
    state.opt_state = Tree();
    throw;
  }
  ++state.step;
  return host_float(r.outputs[0]);
}

std::pair<float, float> ClassifierStep::evaluate(const Tree& params, const Array& x,
                                                 const Array& y) const {
  const Array logits = apply_(params, x);
  return {host_float(mean(optim::softmax_cross_entropy_with_integer_labels(logits, y))),
          host_float(optim::accuracy(logits, y))};
}

}  // namespace flaxpp::train
