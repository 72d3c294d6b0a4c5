// optax gradient transformations, each written once as per-leaf code (update_builder.hpp) that
// runs as fused_elementwise on any backend. Each follows optax 0.2.8's formula to the
// operation order; constants are weak-typed scalars of the leaves' dtype, as in JAX.
#include "flaxpp/optim/transform.hpp"

#include <algorithm>
#include <map>

#include "flaxpp/ir/lax.hpp"
#include "flaxpp/ops/numpy.hpp"

namespace flaxpp::optim {
namespace {

// optax's count: an int32 scalar, made in host memory by init; the updates compute with it as
// optax's jnp code does (traced in a jitted step), so nothing reads it on the host.
Array count_array(std::int32_t c) {
  return Array::scalar(c, Device::cpu());
}
const Array& count_of(const Tree& state) {
  const Array& count = state["count"].array();
  // A state from a corrupt checkpoint must fail here, not in a primitive's shape rule.
  if (count.dtype() != DType::i32 || count.rank() != 0)
    throw ValueError(detail::str("optimiser state \"count\": expected int32[] (a scalar step ",
                                 "count, as init makes it), got ", count.aval(),
                                 "; was the state restored from a corrupt checkpoint?"));
  return count;
}
// optax's numerics.safe_increment: count + 1, stopping at the int32 maximum.
Array safe_increment(const Array& count) {
  const Array top = lax::scalar(2147483647.0, DType::i32);
  return lax::select(lax::lt(count, top), lax::add(count, lax::scalar(1.0, DType::i32)), top);
}
Tree full_like_tree(const Tree& t, double value) {
  return tree_map(
      t, [value](const Array& p) { return Array::full(p.shape(), value, p.dtype(), p.device()); });
}
// bias_correction's divisor 1 - decay ** count, in float32 (each leaf divides by it converted
// to its dtype, as optax's .astype(t.dtype)).
EValue bias_divisor(UpdateBuilder& b, double decay, const Array& count) {
  const Array power = lax::pow(lax::scalar(decay, DType::f32),
                               lax::convert_element_type(count, DType::f32));
  return b.scalar(lax::sub(lax::scalar(1.0, DType::f32), power));
}
// update_moment: (1 - decay) * g**order + decay * t.
EValue update_moment(EValue g, EValue t, double decay, int order) {
  return (1.0 - decay) * (order == 1 ? g : ir::integer_pow(g, order)) + decay * t;
}
// The rms scaling of optax: rsqrt(n + eps) with eps_in_sqrt, else 1 / (sqrt(n) + eps).
EValue rms_scaling(EValue n, double eps, bool eps_in_sqrt) {
  return eps_in_sqrt ? ir::rsqrt(n + eps) : 1.0 / (ir::sqrt(n) + eps);
}
// The new state of a transformation whose state does not change.
StateFn keep(const Tree& state) {
  return [state](const UpdateResults&) { return state; };
}

}  // namespace

GradientTransformation from_emitter(std::function<Tree(const Tree& params)> init, Emitter emit) {
  auto update = [emit](const Tree& u, const Tree& s, const Tree& params) {
    UpdateBuilder b(u, params);
    const StateFn new_state = emit(b, s);
    const int slot = b.store(b.update());
    const UpdateResults r = b.run();
    return std::pair{r.tree(slot), new_state(r)};
  };
  return {std::move(init), std::move(update), std::move(emit)};
}

GradientTransformation chain(std::vector<GradientTransformation> transforms) {
  auto init = [transforms](const Tree& params) {
    Tree state;
    for (std::size_t i = 0; i < transforms.size(); ++i)
      state.set(std::to_string(i), transforms[i].init(params));
    return state;
  };
  if (std::all_of(transforms.begin(), transforms.end(),
                  [](const GradientTransformation& t) { return static_cast<bool>(t.emit); })) {
    return from_emitter(init, [transforms](UpdateBuilder& b, const Tree& state) {
      std::vector<StateFn> parts;
      for (std::size_t i = 0; i < transforms.size(); ++i)
        parts.push_back(transforms[i].emit(b, state[std::to_string(i)]));
      return StateFn([parts](const UpdateResults& r) {
        Tree new_state;
        for (std::size_t i = 0; i < parts.size(); ++i)
          new_state.set(std::to_string(i), parts[i](r));
        return new_state;
      });
    });
  }
  // A custom transformation among them: one update after the other.
  return {init, [transforms](const Tree& updates, const Tree& state, const Tree& params) {
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
  return from_emitter([](const Tree&) { return Tree(); },
                      [](UpdateBuilder&, const Tree& s) { return keep(s); });
}

GradientTransformation scale(double step_size) {
  return from_emitter([](const Tree&) { return Tree(); },
                      [step_size](UpdateBuilder& b, const Tree& s) {
                        b.set_update(b.update() * step_size);
                        return keep(s);
                      });
}

GradientTransformation scale_by_learning_rate(const LearningRate& learning_rate, bool flip_sign) {
  const double m = flip_sign ? -1.0 : 1.0;
  if (const double* lr = std::get_if<double>(&learning_rate)) return scale(m * *lr);
  // scale_by_schedule: updates * schedule(count) (count before this update), then count + 1.
  const Schedule schedule = std::get<Schedule>(learning_rate);
  return from_emitter(
      [](const Tree&) {
        return Tree{{"count", count_array(0)}};
      },
      [schedule, m](UpdateBuilder& b, const Tree& s) {
        const Array& count = count_of(s);
        const Array step = lax::mul(lax::scalar(m, DType::f32), schedule(count));
        b.set_update(b.scalar(step) * b.update());
        return keep(Tree{{"count", safe_increment(count)}});
      });
}

GradientTransformation trace(double decay, bool nesterov) {
  return from_emitter(
      [](const Tree& params) {
        return Tree{{"trace", full_like_tree(params, 0.0)}};
      },
      [decay, nesterov](UpdateBuilder& b, const Tree& s) {
        const EValue g = b.update(), old_trace = b.load(s["trace"]);
        const EValue new_trace = g + decay * old_trace;
        const int slot = b.store(new_trace, old_trace);
        b.set_update(nesterov ? g + decay * new_trace : new_trace);
        return StateFn([slot](const UpdateResults& r) { return Tree{{"trace", r.tree(slot)}}; });
      });
}

GradientTransformation scale_by_adam(const AdamOptions& o) {
  // Copies, not structured bindings: lambdas capture them (clang 14 cannot capture bindings).
  const double b1 = o.b1, b2 = o.b2, eps = o.eps, eps_root = o.eps_root;
  const bool nesterov = o.nesterov;
  return from_emitter(
      [](const Tree& params) {
        return Tree{{"count", count_array(0)},
                    {"mu", full_like_tree(params, 0.0)},
                    {"nu", full_like_tree(params, 0.0)}};
      },
      [=](UpdateBuilder& b, const Tree& s) {
        const EValue g = b.update(), old_mu = b.load(s["mu"]), old_nu = b.load(s["nu"]);
        const EValue mu = update_moment(g, old_mu, b1, 1);
        const EValue nu = update_moment(g, old_nu, b2, 2);
        const Array count_inc = safe_increment(count_of(s));
        const EValue mu_hat =
            nesterov ? b1 * (mu / bias_divisor(b, b1, safe_increment(count_inc))) +
                           (1.0 - b1) * (g / bias_divisor(b, b1, count_inc))
                     : mu / bias_divisor(b, b1, count_inc);
        const EValue nu_hat = nu / bias_divisor(b, b2, count_inc);
        b.set_update(mu_hat / (ir::sqrt(nu_hat + eps_root) + eps));
        const int mu_slot = b.store(mu, old_mu), nu_slot = b.store(nu, old_nu);
        return StateFn([=](const UpdateResults& r) {
          return Tree{
              {"count", count_inc}, {"mu", r.tree(mu_slot)}, {"nu", r.tree(nu_slot)}};
        });
      });
}

GradientTransformation add_decayed_weights(double weight_decay) {
  return from_emitter([](const Tree&) { return Tree(); },
                      [weight_decay](UpdateBuilder& b, const Tree& s) {
                        b.set_update(b.update() + weight_decay * b.params());
                        return keep(s);
                      });
}

GradientTransformation scale_by_rms(const RmsOptions& o) {
  const double decay = o.decay, eps = o.eps, initial_scale = o.initial_scale;
  const bool eps_in_sqrt = o.eps_in_sqrt, bias_correct = o.bias_correction;
  // The state has a count only with bias correction, as optax's ScaleByRmsState.
  return from_emitter(
      [=](const Tree& params) {
        Tree state{{"nu", full_like_tree(params, initial_scale)}};
        if (bias_correct) state.set("count", count_array(0));
        return state;
      },
      [=](UpdateBuilder& b, const Tree& s) {
        const EValue g = b.update(), old_nu = b.load(s["nu"]);
        const EValue nu = update_moment(g, old_nu, decay, 2);
        const Array count_inc = bias_correct ? safe_increment(count_of(s)) : Array();
        const EValue nu_hat = bias_correct ? nu / bias_divisor(b, decay, count_inc) : nu;
        b.set_update(rms_scaling(nu_hat, eps, eps_in_sqrt) * g);
        const int nu_slot = b.store(nu, old_nu);
        return StateFn([=](const UpdateResults& r) {
          Tree new_state{{"nu", r.tree(nu_slot)}};
          if (bias_correct) new_state.set("count", count_inc);
          return new_state;
        });
      });
}

GradientTransformation scale_by_stddev(const RmsOptions& o) {
  const double decay = o.decay, eps = o.eps, initial_scale = o.initial_scale;
  const bool eps_in_sqrt = o.eps_in_sqrt, bias_correct = o.bias_correction;
  return from_emitter(
      [=](const Tree& params) {
        Tree state{{"mu", full_like_tree(params, 0.0)},
                   {"nu", full_like_tree(params, initial_scale)}};
        if (bias_correct) state.set("count", count_array(0));
        return state;
      },
      [=](UpdateBuilder& b, const Tree& s) {
        const EValue g = b.update(), old_mu = b.load(s["mu"]), old_nu = b.load(s["nu"]);
        const EValue mu = update_moment(g, old_mu, decay, 1);
        const EValue nu = update_moment(g, old_nu, decay, 2);
        const Array count_inc = bias_correct ? safe_increment(count_of(s)) : Array();
        const EValue mu_hat = bias_correct ? mu / bias_divisor(b, decay, count_inc) : mu;
        const EValue nu_hat = bias_correct ? nu / bias_divisor(b, decay, count_inc) : nu;
        b.set_update(rms_scaling(nu_hat - ir::integer_pow(mu_hat, 2), eps, eps_in_sqrt) * g);
        const int mu_slot = b.store(mu, old_mu), nu_slot = b.store(nu, old_nu);
        return StateFn([=](const UpdateResults& r) {
          Tree new_state{{"mu", r.tree(mu_slot)}, {"nu", r.tree(nu_slot)}};
          if (bias_correct) new_state.set("count", count_inc);
          return new_state;
        });
      });
}

void check_state(const GradientTransformation& tx, const Tree& params, const Tree& state,
                 const std::string& name) {
  const auto where = [&](const std::string& path) {
    return detail::str("optimiser state '", path.empty() ? name : name + "/" + path, "'");
  };
  std::map<std::string, AVal> came;
  for (const auto& [path, leaf] : state.flatten())
    came.emplace(path, leaf.aval());
  for (const auto& [path, leaf] : tx.init(params).flatten()) {
    const auto it = came.find(path);
    if (it == came.end())
      throw ValueError(detail::str(where(path), " is missing: this optimiser's state has ",
                                   leaf.aval(),
                                   " there; was the checkpoint written with another "
                                   "optimiser or for other parameters?"));
    if (it->second != leaf.aval())
      throw ValueError(detail::str(where(path), ": expected ", leaf.aval(), ", got ", it->second,
                                   "; the checkpoint is corrupt or was written for other "
                                   "parameters"));
    came.erase(it);
  }
  if (!came.empty())
    throw ValueError(detail::str(where(came.begin()->first), " (", came.begin()->second,
                                 ") is not part of this optimiser's state; was the checkpoint "
                                 "written with another optimiser?"));
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
  return from_emitter(
      [](const Tree&) { return Tree(); },
      [max_norm](UpdateBuilder& b, const Tree& s) {
        const EValue g_norm = b.global_norm();
        const EValue t = b.update();
        b.set_update(ir::select(ir::lt(g_norm, b.constant(max_norm)), t, (t / g_norm) * max_norm));
        return keep(s);
      });
}

GradientTransformation sgd(const LearningRate& learning_rate, std::optional<double> momentum,
                           bool nesterov) {
  std::vector<GradientTransformation> parts;
  if (momentum) parts.push_back(trace(*momentum, nesterov));
  parts.push_back(scale_by_learning_rate(learning_rate));
  return chain(std::move(parts));
}

GradientTransformation adam(const LearningRate& learning_rate, const AdamOptions& options) {
  return chain({scale_by_adam(options), scale_by_learning_rate(learning_rate)});
}

GradientTransformation adamw(const LearningRate& learning_rate, const AdamWOptions& o) {
  return chain({scale_by_adam({o.b1, o.b2, o.eps, o.eps_root, o.nesterov}),
                add_decayed_weights(o.weight_decay), scale_by_learning_rate(learning_rate)});
}

GradientTransformation rmsprop(const LearningRate& learning_rate, const RmspropOptions& o) {
  const RmsOptions rms{o.decay, o.eps, o.initial_scale, o.eps_in_sqrt, o.bias_correction};
  return chain({o.centered ? scale_by_stddev(rms) : scale_by_rms(rms),
                scale_by_learning_rate(learning_rate),
                o.momentum ? trace(*o.momentum, o.nesterov) : identity()});
}

Tree apply_updates(const Tree& params, const Tree& updates) {
  return tree_map(params, updates,
                  [](const Array& p, const Array& u) { return astype(p + u, p.dtype()); });
}

std::pair<Tree, Tree> apply_gradients(const GradientTransformation& tx, Tree grads, Tree state,
                                      Tree params) {
  if (!tx.emit) {
    auto [updates, new_state] = tx.update(grads, state, params);
    return {apply_updates(params, updates), std::move(new_state)};
  }
  UpdateBuilder b(std::move(grads), std::move(params));
  const StateFn new_state = tx.emit(b, state);
  state = Tree();  // the builder holds the leaves it loaded: they may be donated
  // apply_updates in the same pass: every operand of a leaf has the parameter's dtype.
  const int slot = b.store(b.params() + b.update(), b.params());
  const UpdateResults r = b.run();
  return {r.tree(slot), new_state(r)};
}

}  // namespace flaxpp::optim
