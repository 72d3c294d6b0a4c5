// The cached and the windowed logits of `flaxpp generate`.
#include "cli/lm_sampler.hpp"

#include <algorithm>
#include <vector>

#include "flaxpp/ops/slicing.hpp"

namespace flaxpp::cli {
namespace {

Array token_row(std::span<const std::int32_t> tokens) {
  return Array::from_vector(std::vector<std::int32_t>(tokens.begin(), tokens.end()),
                            Shape{1, static_cast<std::int64_t>(tokens.size())})
      .to(default_device());
}

}  // namespace

LmSampler::LmSampler(nn::LanguageModel model, Tree params, Tree cache)
    : model_(std::move(model)), params_(std::move(params)), cache_(std::move(cache)) {
  if (!model_.decode) return;
  decode_step_ = jit(
      [decoder = nn::Model(model_)](std::span<const Tree> a) {
        auto [logits, updated] = decoder.apply_mutable(
            nn::Variables{{"params", a[0]}, {"cache", a[1]}}, {"cache"}, a[2].array());
        return std::vector<Tree>{Tree(logits), updated["cache"]};
      },
      {.donate_argnums = {1}});
  model_.decode = false;
}

Array LmSampler::next_logits(std::span<const std::int32_t> tokens) {
  if (decode_step_ && tokens.size() <= static_cast<std::size_t>(model_.max_len)) {
    for (; fed_ < tokens.size(); ++fed_) {
      std::vector<Tree> out =
          (*decode_step_)({params_, std::move(cache_), Tree(token_row(tokens.subspan(fed_, 1)))});
      last_logits_ = out[0].array();
      cache_ = std::move(out[1]);
    }
    return last_logits_;
  }
  const std::size_t window = std::min(tokens.size(), static_cast<std::size_t>(model_.max_len));
  const Array logits =
      nn::Model(model_).apply(nn::Variables{{"params", params_}}, token_row(tokens.last(window)));
  return slice(logits, {{}, {-1, {}}});
}

}  // namespace flaxpp::cli
