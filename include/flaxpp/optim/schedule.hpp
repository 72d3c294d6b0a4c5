// flaxpp/optim/schedule.hpp — optax's learning-rate schedules: functions of the update count
// (0 for the first update), computed in float32 as optax computes them.
#pragma once

#include <cstdint>
#include <functional>
#include <variant>
#include <vector>

namespace flaxpp::optim {

using Schedule = std::function<float(std::int64_t count)>;

Schedule constant_schedule(double value);
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
