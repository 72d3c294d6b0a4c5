// optax schedules, in float32 arithmetic like optax's jnp code (count is an int32 there).
#include "flaxpp/optim/schedule.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "flaxpp/core/dtype.hpp"
#include "flaxpp/core/error.hpp"

namespace flaxpp::optim {

Schedule constant_schedule(double value) {
  const float v = round_to_float32(value);
  return [v](std::int64_t) { return v; };
}

Schedule polynomial_schedule(double init_value, double end_value, double power,
                             std::int64_t transition_steps, std::int64_t transition_begin) {
  const float init = round_to_float32(init_value), end = round_to_float32(end_value);
  if (transition_steps <= 0)
    return [init](std::int64_t) { return init; };  // optax: constant init_value
  const float p = round_to_float32(power);
  return [=](std::int64_t count) {
    const auto c =
        static_cast<float>(std::clamp<std::int64_t>(count - transition_begin, 0, transition_steps));
    const float frac = 1.0f - c / static_cast<float>(transition_steps);
    return (init - end) * std::pow(frac, p) + end;
  };
}

Schedule linear_schedule(double init_value, double end_value, std::int64_t transition_steps,
                         std::int64_t transition_begin) {
  return polynomial_schedule(init_value, end_value, 1.0, transition_steps, transition_begin);
}

Schedule cosine_decay_schedule(double init_value, std::int64_t decay_steps, double alpha,
                               double exponent) {
  if (decay_steps <= 0)
    throw ValueError(
        detail::str("cosine_decay_schedule: decay_steps must be > 0, got ", decay_steps));
  const float init = round_to_float32(init_value), a = round_to_float32(alpha),
              e = round_to_float32(exponent);
  return [=](std::int64_t count) {
    const auto c = static_cast<float>(std::min(count, decay_steps));
    const float cosine =
        0.5f * (1.0f + std::cos(std::numbers::pi_v<float> * c / static_cast<float>(decay_steps)));
    const float decayed = (1.0f - a) * std::pow(cosine, e) + a;
    return init * decayed;
  };
}

Schedule join_schedules(std::vector<Schedule> schedules, std::vector<std::int64_t> boundaries) {
  if (schedules.size() != boundaries.size() + 1)
    throw ValueError(detail::str("join_schedules: ", schedules.size(), " schedules need ",
                                 schedules.size() - 1, " boundaries, got ", boundaries.size()));
  return
      [schedules = std::move(schedules), boundaries = std::move(boundaries)](std::int64_t count) {
        float out = schedules[0](count);
        for (std::size_t i = 0; i < boundaries.size(); ++i)
          if (count >= boundaries[i]) out = schedules[i + 1](count - boundaries[i]);
        return out;
      };
}

Schedule warmup_cosine_decay_schedule(double init_value, double peak_value,
                                      std::int64_t warmup_steps, std::int64_t decay_steps,
                                      double end_value, double exponent) {
  const double alpha = peak_value == 0.0 ? 0.0 : end_value / peak_value;
  return join_schedules(
      {linear_schedule(init_value, peak_value, warmup_steps),
       cosine_decay_schedule(peak_value, decay_steps - warmup_steps, alpha, exponent)},
      {warmup_steps});
}

}  // namespace flaxpp::optim
