// optax schedules as optax's jnp code (optax 0.2.8, schedules/_schedule.py and _join.py): the
// same primitives in the same order on the int32 count, Python's float constants rounded to
// float32 where optax's weak-typed scalars are.
#include "flaxpp/optim/schedule.hpp"

#include <cmath>
#include <numbers>

#include "flaxpp/core/error.hpp"
#include "flaxpp/ir/lax.hpp"

namespace flaxpp::optim {
namespace {

Array i32(std::int64_t v) {
  return lax::scalar(static_cast<double>(v), DType::i32);
}
Array f32(double v) {
  return lax::scalar(v, DType::f32);
}

}  // namespace

Array Schedule::operator()(const Array& count) const {
  if (!fn_) throw ValueError("a learning-rate schedule was called but holds no function");
  if (count.dtype() != DType::i32 || count.rank() != 0)
    throw ValueError(detail::str("a learning-rate schedule takes optax's update count, an int32 ",
                                 "scalar (int32[]); got ", count.aval()));
  const Array value = fn_(count);
  if (value.dtype() != DType::f32 || value.rank() != 0)
    throw ValueError(
        detail::str("a learning-rate schedule must return a float32 scalar, got ", value.aval()));
  return value;
}

float Schedule::operator()(std::int64_t count) const {
  return (*this)(Array::scalar(static_cast<std::int32_t>(count), Device::cpu())).item<float>();
}

Schedule constant_schedule(double value) {
  return Schedule([value](const Array&) { return f32(value); });
}

Schedule polynomial_schedule(double init_value, double end_value, double power,
                             std::int64_t transition_steps, std::int64_t transition_begin) {
  if (transition_steps <= 0) return constant_schedule(init_value);  // optax: init_value
  return Schedule([=](const Array& count) {
    const Array c = lax::min(i32(transition_steps),
                             lax::max(i32(0), lax::sub(count, i32(transition_begin))));
    const Array frac = lax::sub(
        f32(1.0), lax::div(lax::convert_element_type(c, DType::f32),
                           f32(static_cast<double>(transition_steps))));
    const Array powered = power == std::round(power)
                              ? lax::integer_pow(frac, static_cast<std::int64_t>(power))
                              : lax::pow(frac, f32(power));
    return lax::add(lax::mul(f32(init_value - end_value), powered), f32(end_value));
  });
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
  const double steps = static_cast<double>(decay_steps);
  return Schedule([=](const Array& count) {
    const Array c = lax::min(lax::convert_element_type(count, DType::f32), f32(steps));
    const Array cosine = lax::mul(
        f32(0.5),
        lax::add(f32(1.0), lax::cos(lax::div(lax::mul(f32(std::numbers::pi), c), f32(steps)))));
    const Array decayed =
        lax::add(lax::mul(f32(1.0 - alpha), lax::pow(cosine, f32(exponent))), f32(alpha));
    return lax::mul(f32(init_value), decayed);
  });
}

Schedule join_schedules(std::vector<Schedule> schedules, std::vector<std::int64_t> boundaries) {
  if (schedules.size() != boundaries.size() + 1)
    throw ValueError(detail::str("join_schedules: ", schedules.size(), " schedules need ",
                                 schedules.size() - 1, " boundaries, got ", boundaries.size()));
  return Schedule([schedules = std::move(schedules),
                   boundaries = std::move(boundaries)](const Array& count) {
    Array out = schedules[0](count);
    for (std::size_t i = 0; i < boundaries.size(); ++i)
      out = lax::select(lax::lt(count, i32(boundaries[i])), out,
                        schedules[i + 1](lax::sub(count, i32(boundaries[i]))));
    return out;
  });
}

Schedule warmup_cosine_decay_schedule(double init_value, double peak_value,
                                      std::int64_t warmup_steps, std::int64_t decay_steps,
                                      double end_value, double exponent) {
  if (warmup_steps < 0 || decay_steps <= warmup_steps)
    throw ValueError(detail::str(
        "warmup_cosine_decay_schedule: decay_steps (", decay_steps,
        ") must exceed warmup_steps (", warmup_steps, ") >= 0; decay_steps counts the warmup too, "
        "as in optax, so the cosine decay runs for decay_steps - warmup_steps steps"));
  const double alpha = peak_value == 0.0 ? 0.0 : end_value / peak_value;
  return join_schedules(
      {linear_schedule(init_value, peak_value, warmup_steps),
       cosine_decay_schedule(peak_value, decay_steps - warmup_steps, alpha, exponent)},
      {warmup_steps});
}

}  // namespace flaxpp::optim
