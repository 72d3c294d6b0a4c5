// The apply of an MLP classifier, plain or remat'd.
#include "tools/mlp_apply.hpp"

#include "flaxpp/nn/remat.hpp"

namespace flaxpp::train {

ApplyFn mlp_apply(const nn::MLP& mlp, const PolicyPtr& policy) {
  auto apply_of = [](const auto& model) -> ApplyFn {
    return [model](const Tree& params, const Array& x) {
      return model.apply(nn::Variables{{"params", params}}, x);
    };
  };
  return apply_of(remat<nn::MLP>(policy)(mlp));
}

}  // namespace flaxpp::train
