"""The Flax/JAX originals of the four C++ examples in examples/, printing what they print.

Run: python_compat/.venv/bin/python python_compat/examples_originals.py, and compare with
build/examples/flaxpp_{nn_checkpoint_forward,nn_remat_policy,checkpoint_forward,checkpoint_dot_policy}.
"""
import os
os.environ["JAX_PLATFORMS"] = "cpu"
import jax, jax.numpy as jnp, flax.linen as nn
import jax.ad_checkpoint
from flax import nnx
import numpy as np
np.set_printoptions(precision=6, suppress=True)

class MLP2(nn.Module):
    features: int
    @nn.compact
    def __call__(self, x):
        x = nn.relu(nn.Dense(self.features)(x))
        return nn.Dense(self.features)(x)
x = jnp.array([0.1, -2.0, 3.5, 0.0, 1.25])
m = nn.checkpoint(MLP2)(features=7)
print("nn_checkpoint_forward", np.asarray(m.apply(m.init(jax.random.PRNGKey(3), x), x).reshape(-1)))

class MLP3(nn.Module):
    features: int
    @nn.compact
    def __call__(self, x):
        x = nn.relu(nn.Dense(self.features)(x))
        x = nn.relu(nn.Dense(self.features)(x))
        return nn.Dense(self.features)(x)
m = nn.remat(MLP3, policy=jax.checkpoint_policies.dots_with_no_batch_dims_saveable)(features=7)
v = m.init(jax.random.PRNGKey(3), x)
print("nn_remat_policy", np.asarray(m.apply(v, x).reshape(-1)))
jax.ad_checkpoint.print_saved_residuals(lambda p: jnp.sum(m.apply({"params": p}, x) ** 2), v["params"])

class NMLP(nnx.Module):
    def __init__(self, features, num_layers, rngs):
        self.layers = nnx.List([nnx.Linear(features, features, rngs=rngs) for _ in range(num_layers)])
    @nnx.remat
    def __call__(self, x):
        for layer in self.layers:
            x = nnx.relu(layer(x))
        return x
model = NMLP(4, 3, rngs=nnx.Rngs(0))
print("checkpoint_forward", np.asarray(model(jnp.array([[1.0, -0.5, 0.25, 2.0]])).reshape(-1)))

f = lambda w1, w2, x: jnp.sum((jax.nn.relu(x @ w1) @ w2) ** 2)
h = jax.checkpoint(f, policy=jax.checkpoint_policies.dots_with_no_batch_dims_saveable)
w1 = jnp.eye(3) * 0.5; w2 = -jnp.ones((3, 3)) / 3; x2 = jnp.arange(6.0).reshape(2, 3) - 2
print("checkpoint_dot_policy", h(w1, w2, x2), [np.asarray(g).reshape(-1)[:8] for g in jax.grad(h, argnums=(0, 1, 2))(w1, w2, x2)])
