// optax gradient transformations on trees, with eager flaxpp operations (so they run on any
// backend). Each follows optax 0.2.8's formula to the operation order.
#include "flaxpp/optim/transform.hpp"

#include <cmath>

#include "flaxpp/ir/lax.hpp"
#include "flaxpp/ops/numpy.hpp"

namespace flaxpp::optim {
namespace {

Array count_array(std::int64_t c) {
  return Array::scalar(static_cast<std::int32_t>(c));
}
std::int64_t count_of(const Tree& state) {
  return state["count"].array().to_vector<std::int32_t>()[0];
}
// optax's numerics.safe_int32_increment: stops at the int32 maximum instead of overflowing.
std::int64_t safe_increment(std::int64_t c) {
  return c < 2147483647 ? c + 1 : c;
}
Tree zeros_like_tree(const Tree& t) {
  return tree_map(
      t, [](const Array& x) { return Array::full(x.shape(), 0.0, x.dtype(), x.device()); });
}
// bias_correction: moment / (1 - decay ** count), the divisor in float32.
Tree bias_correction(const Tree& moment, double decay, std::int64_t count) {
  // decay ** count as XLA computes it on CPU: the correctly rounded float32 power.
  const float power_f32 = round_to_float32(
      std::pow(static_cast<double>(round_to_float32(decay)), static_cast<double>(count)));
  const float divisor = 1.0f - power_f32;
  return tree_map(moment, [divisor](const Array& t) { return t / static_cast<double>(divisor); });
}
// update_moment: (1 - decay) * g**order + decay * t.
Tree update_moment(const Tree& updates, const Tree& moments, double decay, int order) {
  return tree_map(updates, moments, [decay, order](const Array& g, const Array& t) {
    return (1.0 - decay) * (order == 1 ? g : power(g, order)) + decay * t;
  });
}

}  // namespace

GradientTransformation chain(std::vector<GradientTransformation> transforms) {
  return {[transforms](const Tree& params) {
            Tree state;
            for (std::size_t i = 0; i < transforms.size(); ++i)
              state.set(std::to_string(i), transforms[i].init(params));
            return state;
          },
          [transforms](const Tree& updates, const Tree& state, const Tree& params) {
            Tree u = updates, new_state;
            for (std::size_t i = 0; i < transforms.size(); ++i) {
              auto [next, s] = transforms[i].update(u, state[std::to_string(i)], params);
              u = std::move(next);
              new_state.set(std::to_string(i), std::move(s));
            }
            return std::pair{u, new_state};
          }};
}

GradientTransformation identity() {
  return {[](const Tree&) { return Tree(); },
          [](const Tree& u, const Tree& s, const Tree&) {
            return std::pair{u, s};
          }};
}

GradientTransformation scale(double step_size) {
  return {[](const Tree&) { return Tree(); },
          [step_size](const Tree& u, const Tree& s, const Tree&) {
            return std::pair{tree_map(u, [step_size](const Array& g) { return g * step_size; }), s};
          }};
}

GradientTransformation scale_by_learning_rate(const LearningRate& learning_rate, bool flip_sign) {
  const double m = flip_sign ? -1.0 : 1.0;
  if (const double* lr = std::get_if<double>(&learning_rate)) return scale(m * *lr);
  // scale_by_schedule: updates * schedule(count) (count before this update), then count + 1.
  const Schedule schedule = std::get<Schedule>(learning_rate);
  return {[](const Tree&) {
            return Tree{{"count", count_array(0)}};
          },
          [schedule, m](const Tree& u, const Tree& s, const Tree&) {
            const std::int64_t count = count_of(s);
            const float step = round_to_float32(m * static_cast<double>(schedule(count)));
            return std::pair{
                tree_map(u, [step](const Array& g) { return lax::scalar(step, g.dtype()) * g; }),
                Tree{{"count", count_array(safe_increment(count))}}};
          }};
}

GradientTransformation trace(double decay, bool nesterov) {
  return {[](const Tree& params) {
            return Tree{{"trace", zeros_like_tree(params)}};
          },
          [decay, nesterov](const Tree& u, const Tree& s, const Tree&) {
            auto f = [decay](const Array& g, const Array& t) { return g + decay * t; };
            const Tree new_trace = tree_map(u, s["trace"], f);
            return std::pair{nesterov ? tree_map(u, new_trace, f) : new_trace,
                             Tree{{"trace", new_trace}}};
          }};
}

GradientTransformation scale_by_adam(double b1, double b2, double eps, double eps_root,
                                     bool nesterov) {
  return {
      [](const Tree& params) {
        return Tree{{"count", count_array(0)},
                    {"mu", zeros_like_tree(params)},
                    {"nu", zeros_like_tree(params)}};
      },
      [=](const Tree& u, const Tree& s, const Tree&) {
        const Tree mu = update_moment(u, s["mu"], b1, 1);
        const Tree nu = update_moment(u, s["nu"], b2, 2);
        const std::int64_t count_inc = safe_increment(count_of(s));
        Tree mu_hat;
        if (nesterov) {
          mu_hat = tree_map(
              bias_correction(mu, b1, safe_increment(count_inc)), bias_correction(u, b1, count_inc),
              [b1](const Array& m, const Array& g) { return b1 * m + (1.0 - b1) * g; });
        } else {
          mu_hat = bias_correction(mu, b1, count_inc);
        }
        const Tree nu_hat = bias_correction(nu, b2, count_inc);
        const Tree updates =
            tree_map(mu_hat, nu_hat, [eps, eps_root](const Array& m, const Array& v) {
              return m / (sqrt(v + eps_root) + eps);
            });
        return std::pair{updates, Tree{{"count", count_array(count_inc)}, {"mu", mu}, {"nu", nu}}};
      }};
}

GradientTransformation add_decayed_weights(double weight_decay) {
  return {[](const Tree&) { return Tree(); },
          [weight_decay](const Tree& u, const Tree& s, const Tree& params) {
            return std::pair{tree_map(u, params,
                                      [weight_decay](const Array& g, const Array& p) {
                                        return g + weight_decay * p;
                                      }),
                             s};
          }};
}

// The rms scaling of optax: rsqrt(n + eps) with eps_in_sqrt, else 1 / (sqrt(n) + eps).
Array rms_scaling(const Array& n, double eps, bool eps_in_sqrt) {
  return eps_in_sqrt ? lax::rsqrt(n + eps) : 1.0 / (sqrt(n) + eps);
}

Tree full_like_tree(const Tree& t, double value) {
  return tree_map(
      t, [value](const Array& p) { return Array::full(p.shape(), value, p.dtype(), p.device()); });
}

GradientTransformation scale_by_rms(double decay, double eps, double initial_scale,
                                    bool eps_in_sqrt, bool bias_correct) {
  // The state has a count only with bias correction, as optax's ScaleByRmsState.
  return {[=](const Tree& params) {
            Tree state{{"nu", full_like_tree(params, initial_scale)}};
            if (bias_correct) state.set("count", count_array(0));
            return state;
          },
          [=](const Tree& u, const Tree& s, const Tree&) {
            const Tree nu = update_moment(u, s["nu"], decay, 2);
            Tree new_state{{"nu", nu}};
            Tree nu_hat = nu;
            if (bias_correct) {
              const std::int64_t count_inc = safe_increment(count_of(s));
              nu_hat = bias_correction(nu, decay, count_inc);
              new_state.set("count", count_array(count_inc));
            }
            const Tree updates =
                tree_map(nu_hat, u, [eps, eps_in_sqrt](const Array& n, const Array& g) {
                  return rms_scaling(n, eps, eps_in_sqrt) * g;
                });
            return std::pair{updates, new_state};
          }};
}

GradientTransformation scale_by_stddev(double decay, double eps, double initial_scale,
                                       bool eps_in_sqrt, bool bias_correct) {
  return {
      [=](const Tree& params) {
        Tree state{{"mu", zeros_like_tree(params)}, {"nu", full_like_tree(params, initial_scale)}};
        if (bias_correct) state.set("count", count_array(0));
        return state;
      },
      [=](const Tree& u, const Tree& s, const Tree&) {
        const Tree mu = update_moment(u, s["mu"], decay, 1);
        const Tree nu = update_moment(u, s["nu"], decay, 2);
        Tree new_state{{"mu", mu}, {"nu", nu}};
        Tree mu_hat = mu, nu_hat = nu;
        if (bias_correct) {
          const std::int64_t count_inc = safe_increment(count_of(s));
          mu_hat = bias_correction(mu, decay, count_inc);
          nu_hat = bias_correction(nu, decay, count_inc);
          new_state.set("count", count_array(count_inc));
        }
        const Tree scaling =
            tree_map(mu_hat, nu_hat, [eps, eps_in_sqrt](const Array& m, const Array& n) {
              return rms_scaling(n - square(m), eps, eps_in_sqrt);
            });
        return std::pair{
            tree_map(scaling, u, [](const Array& sc, const Array& g) { return sc * g; }),
            new_state};
      }};
}

Array global_norm(const Tree& updates) {
  Array total;
  for (const auto& [path, leaf] : updates.flatten()) {
    const Array s = sum(square(leaf));
    total = total.valid() ? total + s : s;
  }
  return sqrt(total);
}

GradientTransformation clip_by_global_norm(double max_norm) {
  return {[](const Tree&) { return Tree(); },
          [max_norm](const Tree& u, const Tree& s, const Tree&) {
            const Array g_norm = global_norm(u);
            const Array trigger = lax::lt(g_norm, lax::scalar(max_norm, g_norm.dtype()));
            return std::pair{tree_map(u,
                                      [&](const Array& t) {
                                        return lax::select(broadcast_to(trigger, t.shape()), t,
                                                           (t / g_norm) * max_norm);
                                      }),
                             s};
          }};
}

GradientTransformation sgd(const LearningRate& learning_rate, std::optional<double> momentum,
                           bool nesterov) {
  std::vector<GradientTransformation> parts;
  if (momentum) parts.push_back(trace(*momentum, nesterov));
  parts.push_back(scale_by_learning_rate(learning_rate));
  return chain(std::move(parts));
}

GradientTransformation adam(const LearningRate& learning_rate, double b1, double b2, double eps,
                            double eps_root, bool nesterov) {
  return chain(
      {scale_by_adam(b1, b2, eps, eps_root, nesterov), scale_by_learning_rate(learning_rate)});
}

GradientTransformation adamw(const LearningRate& learning_rate, double b1, double b2, double eps,
                             double eps_root, double weight_decay, bool nesterov) {
  return chain({scale_by_adam(b1, b2, eps, eps_root, nesterov), add_decayed_weights(weight_decay),
                scale_by_learning_rate(learning_rate)});
}

GradientTransformation rmsprop(const LearningRate& learning_rate, double decay, double eps,
                               double initial_scale, bool eps_in_sqrt, bool centered,
                               std::optional<double> momentum, bool nesterov,
                               bool bias_correction) {
  return chain({centered ? scale_by_stddev(decay, eps, initial_scale, eps_in_sqrt, bias_correction)
                         : scale_by_rms(decay, eps, initial_scale, eps_in_sqrt, bias_correction),
                scale_by_learning_rate(learning_rate),
                momentum ? trace(*momentum, nesterov) : identity()});
}

Tree apply_updates(const Tree& params, const Tree& updates) {
  return tree_map(params, updates,
                  [](const Array& p, const Array& u) { return astype(p + u, p.dtype()); });
}

}  // namespace flaxpp::optim
