// nn.Sequential: module entries run in children layers_<index>.
#include "flaxpp/nn/sequential.hpp"

namespace flaxpp::nn {

Array Sequential::operator()(Scope& s, const Array& x) const {
  if (layers.empty())
    throw ValueError(detail::str("Sequential at ", s.path_str(), " has no layers"));
  Array h = x;
  for (std::size_t i = 0; i < layers.size(); ++i) {
    const Layer& l = layers[i];
    if (l.module) {
      h = s.call(
          detail::str("layers_", i), [&l](Scope& c, const Array& v) { return l.module(c, v); }, h);
    } else if (l.function) {
      h = l.function(h);
    } else {
      throw ValueError(detail::str("Sequential at ", s.path_str(), ": layer ", i, " is empty"));
    }
  }
  return h;
}

}  // namespace flaxpp::nn
