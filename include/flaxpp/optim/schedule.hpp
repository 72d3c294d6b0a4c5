// flaxpp/optim/schedule.hpp — optax's learning-rate schedules: functions of optax's update
// count (an int32 scalar, 0 for the first update) written as optax's jnp code over Arrays, so
// they give optax's float32 values and trace like any other code: a jitted step computes its
// learning rate from the count in its optimiser state.
#pragma once

#include <cstdint>
#include <functional>
#include <utility>
#include <variant>
#include <vector>

#include "flaxpp/core/array.hpp"

namespace flaxpp::optim {

class Schedule {
 public:
  // count (int32[], concrete or traced) -> the value (float32[]).
  using Fn = std::function<Array(const Array& count)>;
  Schedule() = default;
  Schedule(Fn fn) : fn_(std::move(fn)) {}  // NOLINT(google-explicit-constructor): optax's callables

  // The value at `count`; ValueError unless count is an int32 scalar.
  Array operator()(const Array& count) const;
  // The value at a concrete count, computed on the host.
  float operator()(std::int64_t count) const;
  explicit operator bool() const { return static_cast<bool>(fn_); }

 private:
  Fn fn_;
};

Schedule constant_schedule(double value);
// (init - end) * (1 - clip(count - begin, 0, steps) / steps) ** power + end; an integral power
// is an integer_pow, as optax's Python int power is.
Schedule polynomial_schedule(double init_value, double end_value, double power,
                             std::int64_t transition_steps, std::int64_t transition_begin = 0);
Schedule linear_schedule(double init_value, double end_value, std::int64_t transition_steps,
                         std::int64_t transition_begin = 0);
Schedule cosine_decay_schedule(double init_value, std::int64_t decay_steps, double alpha = 0.0,
                               double exponent = 1.0);
// schedules[0] before boundaries[0], schedules[1] (from count - boundaries[0]) after, ...
Schedule join_schedules(std::vector<Schedule> schedules, std::vector<std::int64_t> boundaries);
Schedule warmup_cosine_decay_schedule(double init_value, double peak_value,
                                      std::int64_t warmup_steps, std::int64_t decay_steps,
                                      double end_value = 0.0, double exponent = 1.0);

// optax's ScalarOrSchedule: a fixed learning rate or a schedule.
using LearningRate = std::variant<double, Schedule>;

}  // namespace flaxpp::optim
