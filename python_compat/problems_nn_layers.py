"""Reference cases for the ``layernorm`` and ``dropout`` module problems of docs/refs-format.md.

Every expected value comes from the Flax call the registry names, eagerly (no ``jax.jit``),
on exactly the float32 inputs written to the case:

* ``layernorm``: ``nn.LayerNorm(epsilon=..., use_scale=..., use_bias=...)``, init with
  ``PRNGKey(seed)``, apply
* ``dropout``: ``nn.Dropout(rate, deterministic=False).apply({}, x, rngs={"dropout":
  PRNGKey(seed)})``

Self-checks run for every case (an AssertionError stops generation): LayerNorm's parameters
are ones and zeros, and its output agrees with Flax's fast-variance formula in NumPy float32
(XLA's and sequential sums) within half the case's tolerance; each dropout mask equals
``uniform(fold_in(PRNGKey(seed), H(1)), shape) < float32(1 - rate)`` with ``H`` Flax's SHA-1
hash of the static path (semantics §3.2).

``cases()`` returns these problems' cases in nn.json's order; problems_nn.py's ``cases()``
places them among the others (and resets the diagnostics).
"""

from __future__ import annotations

from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from problems_nn_base import (NEG, S31, S32, _check_close, _np, _tag, draw_x, flax_hash, prng,
                              seq_sum)
from problems_random import shape_tag
from refs_writer import array, make_case

LAYERNORM_TOL = {"rtol": 1e-5, "atol": 1e-6}
DROPOUT_TOL = {"rtol": 1e-6, "atol": 0}


# --------------------------------------------------------------------------- problems


def np_layernorm(x: np.ndarray, eps: float, sequential: bool) -> np.ndarray:
    """Flax's fast-variance LayerNorm (scale 1, bias 0) in NumPy float32."""
    D = x.shape[-1]
    flat = x.reshape(-1, D).astype(np.float32)
    if sequential:
        s1 = np.array([seq_sum(r) for r in flat], np.float32)
        s2 = np.array([seq_sum(r * r) for r in flat], np.float32)
    else:
        s1 = np.sum(flat, axis=-1, dtype=np.float32)
        s2 = np.sum(flat * flat, axis=-1, dtype=np.float32)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        # jnp.mean = sum / D, which XLA on CPU computes as sum * float32(1 / D).
        inv_d = np.float32(1) / np.float32(D)
        mu = (s1 * inv_d).astype(np.float32)
        mu2 = (s2 * inv_d).astype(np.float32)
        var = mu2 - mu * mu
        var = np.where(np.isnan(var), var, np.maximum(np.float32(0), var)).astype(np.float32)
        mul = (np.float32(1) / np.sqrt(var + np.float32(eps))).astype(np.float32)
        y = ((flat - mu[:, None]) * mul[:, None]).astype(np.float32)
    return y.reshape(x.shape)


def case_layernorm(seed: Any, x: np.ndarray, label: str, *, epsilon: float | None = None,
                   use_scale: bool | None = None, use_bias: bool | None = None) -> dict:
    kwargs: dict = {}
    inputs: dict = {"seed": seed, "x": array(x, "float32")}
    tag = ""
    if epsilon is not None:
        kwargs["epsilon"] = epsilon
        inputs["epsilon"] = epsilon
        tag += f"-eps{epsilon!r}"
    if use_scale is not None:
        kwargs["use_scale"] = use_scale
        inputs["use_scale"] = use_scale
        tag += f"-scale{str(use_scale).lower()}"
    if use_bias is not None:
        kwargs["use_bias"] = use_bias
        inputs["use_bias"] = use_bias
        tag += f"-bias{str(use_bias).lower()}"
    ln = nn.LayerNorm(**kwargs)
    xj = jnp.asarray(x)
    variables = ln.init(prng(seed), xj)
    want_params = ([("bias", np.zeros)] if use_bias is not False else []) + \
                  ([("scale", np.ones)] if use_scale is not False else [])
    assert sorted(variables.get("params", {})) == [n for n, _ in want_params]
    for n, fill in want_params:
        assert np.array_equal(_np(variables["params"][n]), fill(x.shape[-1], np.float32))
    out = _np(ln.apply(variables, xj))
    assert out.dtype == np.float32 and out.shape == x.shape
    eps = 1e-6 if epsilon is None else epsilon
    case_id = f"layernorm/seed{_tag(seed)}-x{shape_tag(x.shape)}-{label}{tag}"
    for seq in (False, True):
        _check_close(f"{case_id} seq={seq}", np_layernorm(x, eps, seq), out, LAYERNORM_TOL)
    return make_case(case_id, "layernorm", inputs, array(out, "float32"), **LAYERNORM_TOL)


def case_dropout(seed: Any, x: np.ndarray, rate: Any, label: str) -> dict:
    xj = jnp.asarray(x)
    out = _np(nn.Dropout(rate, deterministic=False).apply({}, xj, rngs={"dropout": prng(seed)}))
    assert out.dtype == np.float32 and out.shape == x.shape
    # The documented derivation: key = fold_in(PRNGKey(seed), H(1)) (root scope, first
    # make_rng), mask = uniform(key, x.shape) < float32(1 - rate), kept values
    # x * float32(1 / float32(1 - rate)): XLA on CPU rewrites the division by a broadcast
    # scalar into a multiplication by its float32 reciprocal (not x / keep, which differs
    # by 1 ulp for some elements; the case's rtol 1e-6 accepts either).
    if rate == 0:
        want = x
    elif rate == 1:
        want = np.zeros_like(x)
    else:
        keep = np.float32(1.0 - rate)
        key = jax.random.fold_in(prng(seed), flax_hash(1))
        mask = _np(jax.random.uniform(key, x.shape, jnp.float32)) < keep
        with np.errstate(invalid="ignore", over="ignore"):
            want = np.where(mask, (x * (np.float32(1) / keep)).astype(np.float32), np.float32(0))
            divided = np.where(mask, (x / keep).astype(np.float32), np.float32(0))
        _check_close(f"dropout x/keep seed={seed} rate={rate}", divided, out, DROPOUT_TOL)
    assert np.array_equal(want, out, equal_nan=True), "dropout derivation differs"
    case_id = f"dropout/seed{_tag(seed)}-x{shape_tag(x.shape)}-rate{_tag(rate)}-{label}"
    inputs = {"seed": seed, "x": array(x, "float32"), "rate": rate}
    return make_case(case_id, "dropout", inputs, array(out, "float32"), **DROPOUT_TOL)


# --------------------------------------------------------------------------- case list


def cases() -> list[dict]:
    """The layernorm and dropout cases (part of nn.json)."""
    out: list[dict] = []

    # ---- layernorm
    out.append(case_layernorm(0, draw_x([2, 5], 5000), "normal"))
    out.append(case_layernorm(1, draw_x([7], 5001), "normal"))
    out.append(case_layernorm(-1, draw_x([2, 3, 4], 5002), "normal", epsilon=1e-5))
    out.append(case_layernorm(S31, draw_x([4, 1], 5003), "normal"))  # D=1: output 0
    out.append(case_layernorm(3.0, draw_x([3, 6], 5004, scale=3.0, offset=1.0), "offset",
                              use_scale=False))
    out.append(case_layernorm(42, draw_x([3, 6], 5005), "normal", use_bias=False))
    out.append(case_layernorm(7, draw_x([2, 8], 5006), "normal", use_scale=False, use_bias=False))
    out.append(case_layernorm(8, draw_x([2, 8], 5007), "normal", epsilon=0.5, use_scale=True,
                              use_bias=True))
    out.append(case_layernorm(9, draw_x([5, 33], 5008), "normal", epsilon=1e-6))
    out.append(case_layernorm(NEG, draw_x([2, 300], 5009), "normal"))
    out.append(case_layernorm(10, draw_x([3, 2, 17], 5010, scale=1e-3), "small"))
    out.append(case_layernorm(11, draw_x([3, 4], 5011, scale=100.0), "large", epsilon=0.0))
    out.append(case_layernorm(12, draw_x([2, 2], 5012), "normal", epsilon=0.0))
    # Constant rows of exactly representable values: var is exactly 0; with epsilon 0 the
    # result is 0 * rsqrt(0) = 0 * inf = NaN, with the default epsilon it is 0.
    const = np.array([[2.0, 2.0, 2.0, 2.0], [-0.5, -0.5, -0.5, -0.5], [1.0, 2.0, 3.0, 4.0]],
                     np.float32)
    out.append(case_layernorm(13, const, "const"))
    out.append(case_layernorm(13, const, "const", epsilon=0.0))
    # Non-finite inputs: a row holding NaN or +-inf gives NaN everywhere in that row.
    nonfin = draw_x([4, 3], 5015)
    nonfin[0, 1] = np.nan
    nonfin[1, 0] = np.inf
    nonfin[2, 2] = -np.inf
    out.append(case_layernorm(14, nonfin, "nonfinite"))
    out.append(case_layernorm(S32, draw_x([16, 64], 5016), "normal", use_scale=True))

    # ---- dropout: rates 0, 0.5, 0.1, 0.9, 1.0 and rates whose float32(1 - rate) differs
    # from 1 - float32(rate) (0.09, 0.067); odd shapes incl. 0-d and empty.
    for seed, shape, rate, xs in [
        (0, [5, 4], 0.5, 6000),
        (1, [7], 0.1, 6001),
        (-1, [3, 3, 3], 0.9, 6002),
        (42, [2, 5], 0.0, 6003),
        (S31, [4, 4], 1.0, 6004),
        (3.0, [], 0.5, 6005),
        (NEG, [], 0.1, 6006),
        (S32, [2, 0], 0.5, 6007),
        (7, [1, 2, 3, 4], 0.3, 6008),
        (123456789, [17, 19], 0.09, 6009),
        (-2, [100], 0.067, 6010),
        (8, [64, 33], 0.5, 6011),
        (9, [1], 0.9, 6012),
        (10, [3, 5], 0, 6013),
        (11, [3, 5], 1, 6014),
        (12, [2, 3], 0.25, 6015),
    ]:
        out.append(case_dropout(seed, draw_x(shape, xs), rate, f"xs{xs}"))
    # Non-finite values, signed zeros and a value that overflows when scaled, four times
    # each so that every rate keeps some of them.  (No subnormals: XLA on CPU flushes them
    # to zero in arithmetic, an artefact of the backend, not of Flax.)
    special = np.tile(np.array([np.nan, np.inf, -np.inf, -0.0, 0.0, 1.0, -2.5, 3e38, -7.0],
                               np.float32), 4)
    for rate in (0.0, 0.1, 0.5, 1.0):
        out.append(case_dropout(13, special, rate, "special"))

    return out
