"""Writes tests/package/user_check.json, the cases of the user check program
(tests/package/user_check.cpp), with python_compat/flaxpp_refs.py: JAX's values and gradients.

    python_compat/.venv/bin/python tests/package/gen_user_check.py
"""

import os
import sys

import jax
import jax.numpy as jnp
import numpy as np
from jax.ad_checkpoint import checkpoint_name

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python_compat"))
import flaxpp_refs  # noqa: E402


def affine_gelu(w, b, x):
    return jax.nn.gelu(x @ w + b)


# A layer with LayerNorm (written out) and gelu, its pre-norm value named "hidden".
POLICY = {"name": "save_only_these_names", "names": ["hidden"]}


def layer(w, b, scale, offset, x, policy=None):
    h = checkpoint_name(x @ w + b, "hidden")
    c = h - jnp.mean(h, axis=-1, keepdims=True)
    n = c / jnp.sqrt(jnp.mean(c * c, axis=-1, keepdims=True) + 1e-5) * scale + offset
    return jax.nn.gelu(n)


def policy_of(spec):
    return jax.checkpoint_policies.save_only_these_names(*spec["names"])


rng = np.random.default_rng(0)
cases = []
for i, (n, d, f) in enumerate([(2, 3, 4), (5, 8, 6)]):
    inputs = {"w": rng.normal(size=(d, f)), "b": rng.normal(size=f), "x": rng.normal(size=(n, d))}
    cases.append(flaxpp_refs.case(f"affine_gelu/{i}-N{n}-D{d}-F{f}", "user.affine_gelu",
                                  affine_gelu, inputs, grads=["w", "b"], rtol=1e-5, atol=1e-6))
for i, (n, d, f) in enumerate([(3, 4, 5), (6, 8, 16)]):
    inputs = {"w": rng.normal(size=(d, f)), "b": rng.normal(size=f),
              "scale": rng.normal(size=f), "offset": rng.normal(size=f),
              "x": rng.normal(size=(n, d))}
    policy = jax.checkpoint_policies.save_only_these_names("hidden")
    cases.append(flaxpp_refs.case(
        f"layer/{i}-N{n}-D{d}-F{f}", "user.layer",
        lambda policy, **a: jax.checkpoint(layer, policy=policy_of(policy))(**a), inputs,
        grads=["w", "b", "scale", "offset"], extra={"policy": POLICY}, rtol=1e-5, atol=1e-5))
    cases.append(flaxpp_refs.residuals_case(f"layer_residuals/{i}-N{n}-D{d}-F{f}",
                                            "user.layer_residuals", layer, inputs, policy,
                                            extra={"policy": POLICY}))
flaxpp_refs.write(os.path.join(os.path.dirname(__file__), "user_check.json"), cases)
