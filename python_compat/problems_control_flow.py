"""Reference cases for the control-flow problems of docs/refs-problems.md (tests/refs/control_flow.json).

Problems (flaxpp's own, documented in docs/refs-problems.md):

* ``control_flow_grad``: ``jax.value_and_grad(h, argnums=(0, 1))(w, x)`` where ``h`` is one of
  the functions below, or ``jax.checkpoint(h, policy=P)`` for a policy spec other than
  ``"none"``; expected ``{"value", "w", "x"}``.
* ``control_flow_saved_residuals``: ``jax._src.ad_checkpoint.saved_residuals(
  jax.checkpoint(h, policy=P), w, x)`` as the contract's ``saved_residuals`` encodes it (a
  list of ``{"dtype", "shape", "kind"}``, compared as a multiset), for ``cond_loss`` and
  ``switch_loss``: what the policy keeps inside the branches.

The functions (``w`` f32[d,d], ``x`` f32[N,d]):

* ``cond_loss``: ``sum(lax.cond(sum(x) > 0, lambda w, x: tanh(checkpoint_name(x @ w, "h")),
  lambda w, x: sin(x) * w[0], w, x) ** 2)``;
* ``switch_loss`` (input ``index``, any int, clamped by JAX): ``sum(lax.switch(index,
  [lambda w, x: tanh(checkpoint_name(x @ w, "h")), lambda w, x: sin(x) * w[0],
  lambda w, x: (x @ w) @ w], w, x) ** 2)``;
* ``fori_loss`` (inputs ``lower``, ``upper``, static ints): ``sum(lax.fori_loop(lower, upper,
  lambda i, y: tanh(y @ w) + i, x) ** 2)``.

Inputs are drawn with ``numpy.random.default_rng(seed)``: ``w`` ~ N(0, 1)/sqrt(d),
``x`` ~ N(0, 1) shifted so that ``sum(x)`` is clearly positive or negative (the cond's branch
does not hang on rounding), rounded to float32. Tolerances follow the remat family's rule
(problems_remat.tolerance).
"""

from __future__ import annotations

from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax._src.ad_checkpoint import saved_residuals as jax_saved_residuals
from jax.ad_checkpoint import checkpoint_name

from problems_remat import checkpointed, residual_records, spec_tag, tolerance
from refs_writer import array, make_case

#: Human-readable notes about inputs JAX rejected (filled while generating).
SKIPPED: list[str] = []


def _dense_tanh(w, x):
    return jnp.tanh(checkpoint_name(x @ w, "h"))


def _sin_row(w, x):
    return jnp.sin(x) * w[0]


def _two_products(w, x):
    return (x @ w) @ w


def cond_loss(w, x):
    return jnp.sum(lax.cond(jnp.sum(x) > 0, _dense_tanh, _sin_row, w, x) ** 2)


def switch_loss(index: int) -> Callable:
    return lambda w, x: jnp.sum(lax.switch(index, [_dense_tanh, _sin_row, _two_products], w, x) ** 2)


def fori_loss(lower: int, upper: int) -> Callable:
    return lambda w, x: jnp.sum(lax.fori_loop(lower, upper, lambda i, y: jnp.tanh(y @ w) + i, x) ** 2)


def function_of(inputs: dict) -> Callable:
    name = inputs["function"]
    if name == "cond_loss":
        return cond_loss
    if name == "switch_loss":
        return switch_loss(inputs["index"])
    if name == "fori_loss":
        return fori_loss(inputs["lower"], inputs["upper"])
    raise ValueError(name)


def draw(N: int, d: int, seed: int, sign: float) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    w = (rng.standard_normal((d, d)) / np.sqrt(d)).astype(np.float32)
    x = rng.standard_normal((N, d))
    x = (x - x.mean() + sign * 0.25).astype(np.float32)
    assert np.sign(float(np.sum(x, dtype=np.float64))) == sign
    return w, x


def case_grad(extra: dict, w: np.ndarray, x: np.ndarray, spec: Any, label: str) -> dict:
    inputs = {**extra, "policy": spec, "w": array(w, "float32"), "x": array(x, "float32")}
    fn = checkpointed(function_of(inputs), spec)
    value, (gw, gx) = jax.value_and_grad(fn, argnums=(0, 1))(jnp.asarray(w), jnp.asarray(x))
    expected = {"value": np.asarray(value), "w": np.asarray(gw), "x": np.asarray(gx)}
    tol = tolerance(w.shape[0], list(expected.values()))
    case_id = f"control_flow_grad/{label}-{spec_tag(spec)}"
    return make_case(case_id, "control_flow_grad", inputs,
                     {k: array(v, "float32") for k, v in expected.items()}, **tol)


def case_residuals(extra: dict, w: np.ndarray, x: np.ndarray, spec: Any, label: str) -> dict:
    inputs = {**extra, "policy": spec, "w": array(w, "float32"), "x": array(x, "float32")}
    res = jax_saved_residuals(checkpointed(function_of(inputs), spec), jnp.asarray(w),
                              jnp.asarray(x))
    case_id = f"control_flow_saved_residuals/{label}-{spec_tag(spec)}"
    return make_case(case_id, "control_flow_saved_residuals", inputs, residual_records(res),
                     rtol=0, atol=0)


GRAD_SPECS: list[Any] = ["none", "nothing_saveable", "dots_saveable",
                         "dots_with_no_batch_dims_saveable", "everything_saveable",
                         {"name": "save_only_these_names", "names": ["h"]}]
RESIDUAL_SPECS: list[Any] = ["nothing_saveable", "dots_saveable",
                             "dots_with_no_batch_dims_saveable",
                             {"name": "save_only_these_names", "names": ["h"]},
                             {"name": "save_any_names_but_these", "names": ["h"]}]


def cases() -> list[dict]:
    out: list[dict] = []
    shapes = [(3, 4, 1), (5, 8, 2), (1, 1, 3), (7, 3, 4)]
    for N, d, seed in shapes:
        for sign in (1.0, -1.0):
            w, x = draw(N, d, seed, sign)
            label = f"cond_loss-{'pos' if sign > 0 else 'neg'}-N{N}-d{d}"
            for spec in GRAD_SPECS:
                out.append(case_grad({"function": "cond_loss"}, w, x, spec, label))
            for spec in RESIDUAL_SPECS:
                out.append(case_residuals({"function": "cond_loss"}, w, x, spec, label))
    w, x = draw(4, 5, 5, 1.0)
    for index in (-1, 0, 1, 2, 7):
        label = f"switch_loss-index{index}-N4-d5"
        for spec in GRAD_SPECS:
            out.append(case_grad({"function": "switch_loss", "index": index}, w, x, spec, label))
        for spec in RESIDUAL_SPECS:
            out.append(case_residuals({"function": "switch_loss", "index": index}, w, x, spec,
                                      label))
    for lower, upper in ((0, 3), (2, 5), (3, 3), (4, 1)):
        label = f"fori_loss-{lower}-{upper}-N4-d5"
        for spec in ("none", "nothing_saveable", "dots_saveable"):
            out.append(case_grad({"function": "fori_loss", "lower": lower, "upper": upper},
                                 w, x, spec, label))
    return out
