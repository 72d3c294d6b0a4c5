"""Writes tests/package/user_check.json, the cases of the user check program
(tests/package/user_check.cpp), with python_compat/flaxpp_refs.py: JAX's values and gradients.

    python_compat/.venv/bin/python tests/package/gen_user_check.py
"""

import os
import sys

import jax
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python_compat"))
import flaxpp_refs  # noqa: E402


def affine_gelu(w, b, x):
    return jax.nn.gelu(x @ w + b)


rng = np.random.default_rng(0)
cases = []
for i, (n, d, f) in enumerate([(2, 3, 4), (5, 8, 6)]):
    inputs = {"w": rng.normal(size=(d, f)), "b": rng.normal(size=f), "x": rng.normal(size=(n, d))}
    cases.append(flaxpp_refs.case(f"affine_gelu/{i}-N{n}-D{d}-F{f}", "user.affine_gelu",
                                  affine_gelu, inputs, grads=["w", "b"], rtol=1e-5, atol=1e-6))
flaxpp_refs.write(os.path.join(os.path.dirname(__file__), "user_check.json"), cases)
