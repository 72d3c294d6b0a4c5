// MLP: Dense layers with an activation between them.
#include "flaxpp/nn/mlp.hpp"

#include "flaxpp/ops/activations.hpp"

namespace flaxpp::nn {

Array MLP::operator()(Scope& s, const Array& x) const {
  if (features.empty())
    throw ValueError(detail::str("MLP at ", s.path_str(), ": features is empty"));
  const std::function<Array(const Array&)> act =
      activation ? activation
                 : std::function<Array(const Array&)>([](const Array& v) { return relu(v); });
  Array h = x;
  for (std::size_t i = 0; i < features.size(); ++i) {
    h = s(Dense{.features = features[i], .dtype = dtype}, h);
    if (i + 1 < features.size() || activate_final) h = act(h);
  }
  return h;
}

}  // namespace flaxpp::nn
