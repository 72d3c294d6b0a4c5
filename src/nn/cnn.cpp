// The reference problems' ConvBlock and CNN, line for line as their Flax definitions.
#include "flaxpp/nn/cnn.hpp"

#include "flaxpp/nn/conv.hpp"
#include "flaxpp/nn/dense.hpp"
#include "flaxpp/nn/dropout.hpp"
#include "flaxpp/nn/normalization.hpp"
#include "flaxpp/nn/pooling.hpp"
#include "flaxpp/nn/remat.hpp"
#include "flaxpp/ops/activations.hpp"
#include "flaxpp/ops/numpy.hpp"

namespace flaxpp::nn {

Array ConvBlock::operator()(Scope& s, const Array& x, bool train) const {
  Array y = s(Conv{.features = features, .kernel_size = {3, 3}}, x);
  if (use_batchnorm)
    y = s(BatchNorm{.use_running_average = !train, .momentum = 0.9, .axis_name = axis_name}, y);
  return avg_pool(relu(y), {2, 2}, {.strides = {2, 2}});
}

Array CNN::operator()(Scope& s, const Array& x, bool train) const {
  if (x.rank() != 4)
    throw ValueError(
        detail::str("CNN at ", s.path_str(), ": expected images (B, H, W, C), got ", x.aval()));
  Array h = x;
  for (const std::int64_t f : features) {
    const ConvBlock block{.features = f, .use_batchnorm = use_batchnorm, .axis_name = axis_name};
    h = s(remat<ConvBlock>(policy, {}, false)(block), h, train);
  }
  Array pooled = mean(h, std::vector<std::int64_t>{1, 2});
  if (dropout > 0.0) pooled = s(Dropout{.rate = dropout, .deterministic = !train}, pooled);
  return s(Dense{.features = classes}, pooled);
}

}  // namespace flaxpp::nn
