// The apply of the CNN, with or without batch statistics and dropout keys.
#include "tools/cnn_apply.hpp"

namespace flaxpp::train {

StatefulApplyFn cnn_apply(const nn::CNN& cnn, std::function<Array(const Array&)> images) {
  return [model = nn::Model(cnn), images = std::move(images)](
             const Tree& params, const Tree& stats, const Array& x, const ApplyMode& mode) {
    const Array in = images ? images(x) : x;
    if (stats.leaves().empty())
      return std::pair<Array, Tree>{
          model.apply_with_rngs(nn::Variables{{"params", params}}, mode.rngs, in, mode.train),
          stats};
    auto [logits, updates] =
        model.apply_mutable_with_rngs(nn::Variables{{"params", params}, {"batch_stats", stats}},
                                      mode.rngs, {"batch_stats"}, in, mode.train);
    return std::pair<Array, Tree>{logits, updates["batch_stats"]};
  };
}

}  // namespace flaxpp::train
