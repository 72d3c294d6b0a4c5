// extend_optimizer: an optimiser of your own (docs/EXTENDING.md), sign descent with momentum
// (signum), written twice:
//   - plain: init and update over trees, as an optax GradientTransformation is written
//     (runs anywhere, one primitive per operation per leaf);
//   - fused: the same update as per-element code (from_emitter), which chains with the
//     built-in transformations into one pass per dtype (one kernel per dtype on a GPU).
// optax's equivalent:
//
//   def signum(beta):
//     def init(params):
//       return {"m": jax.tree.map(jnp.zeros_like, params)}
//     def update(g, state, params=None):
//       m = jax.tree.map(lambda g, m: beta * m + (1 - beta) * g, g, state["m"])
//       return jax.tree.map(jnp.sign, m), {"m": m}
//     return optax.GradientTransformation(init, update)
//   tx = optax.chain(signum(0.9), optax.scale_by_learning_rate(0.1))
//
// Trains the same linear model for 5 steps with both; fails unless they agree to the bit.
#include <flaxpp/flaxpp.hpp>
#include <iostream>

#include "verdict.hpp"

using namespace flaxpp;

Tree zeros_tree(const Tree& params) {
  return tree_map(params,
                  [](const Array& p) { return Array::full(p.shape(), 0.0, p.dtype(), p.device()); });
}

optim::GradientTransformation signum_plain(double beta) {
  return {.init = [](const Tree& params) { return Tree{{"m", zeros_tree(params)}}; },
          .update = [beta](const Tree& g, const Tree& state, const Tree&) {
            const Tree m = tree_map(g, state["m"], [beta](const Array& gi, const Array& mi) {
              return beta * mi + (1.0 - beta) * gi;
            });
            return std::pair{tree_map(m, [](const Array& a) { return lax::sign(a); }),
                             Tree{{"m", m}}};
          }};
}

optim::GradientTransformation signum_fused(double beta) {
  return optim::from_emitter(
      [](const Tree& params) { return Tree{{"m", zeros_tree(params)}}; },
      [beta](optim::UpdateBuilder& b, const Tree& state) {
        const ir::EValue g = b.update(), old_m = b.load(state["m"]);
        const ir::EValue m = beta * old_m + (1.0 - beta) * g;
        b.set_update(ir::sign(m));
        const int slot = b.store(m, old_m);  // the new m takes the old one's buffer
        return optim::StateFn(
            [slot](const optim::UpdateResults& r) { return Tree{{"m", r.tree(slot)}}; });
      });
}

int main() try {
  const Array x = random::normal(random::key(0), Shape{16, 3});
  const Array y = random::normal(random::key(1), Shape{16, 2});
  const Tree init{{"w", random::normal(random::key(2), Shape{3, 2})}, {"b", zeros(Shape{2})}};
  auto loss = [&](const Tree& p) {
    return mean(square(matmul(x, p["w"].array()) + p["b"].array() - y));
  };
  std::vector<Tree> results;
  for (const optim::GradientTransformation& custom : {signum_plain(0.9), signum_fused(0.9)}) {
    const optim::GradientTransformation tx =
        optim::chain({custom, optim::scale_by_learning_rate(0.1)});
    Tree params = init, state = tx.init(init);
    for (int step = 0; step < 5; ++step) {
      auto [value, grads] = value_and_grad(loss)(params);
      std::tie(params, state) = optim::apply_gradients(tx, std::move(grads), state, params);
      if (step == 4) std::cout << "loss after 5 steps " << value << "\n";
    }
    results.push_back(params);
  }
  bool same = true;
  for (const auto& [path, w] : results[0].flatten())
    same = same && w.to_vector<float>() == results[1].at(path).array().to_vector<float>();
  return verdict(same, "plain and fused signum agree to the bit",
                 "the plain and the fused signum differ");
} catch (const Error& e) {
  std::cerr << "error: " << e.what() << "\n";
  return 1;
}
