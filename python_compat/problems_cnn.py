"""Reference cases for convolutions and pooling (docs/refs-format.md, "Convolutions, pooling,
normalisation and batch statistics"; tests/refs/cnn.json).

Problems:

* ``conv``: ``nn.Conv(features, kernel_size, strides=..., padding=..., use_bias=...,
  feature_group_count=...)``, ``init(PRNGKey(seed), x)``, ``apply``. Expected
  ``{"params": {"kernel"[, "bias"]}, "y"}``.
* ``conv_grad``: as ``conv``; ``loss = sum(apply(params, x)**2)`` and ``jax.value_and_grad``
  w.r.t. the params collection and x. Expected ``{"loss", "grads": {"params": ..., "x"}}``.
* ``pool``: ``nn.max_pool`` / ``nn.avg_pool(x, window_shape, strides=..., padding=...)``.
* ``pool_grad``: ``jax.grad(lambda x: sum(pool(x)**2))(x)``.

x is drawn from N(0, 1) (problems_nn_base.draw_x). Padding is a string or a list of
``[low, high]`` pairs, as the contract spells it; pairs are passed to Flax as tuples.

Self-checks (an AssertionError stops generation): the convolution's output equals a float64
NumPy direct convolution of the same params within half the case's tolerance, its kernel has
the shape (*kernel_size, C / groups, features), and a max pool's windows hold no ties (so the
gradient's choice of element does not depend on the tie rule).
"""

from __future__ import annotations

from typing import Any, Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from problems_nn_base import _np, _tag, draw_x, prng
from problems_random import shape_tag
from problems_remat import tolerance
from refs_writer import array, make_case

#: Human-readable notes about inputs JAX rejected (filled while generating).
SKIPPED: list[str] = []


def _flax_padding(padding: Any) -> Any:
    return padding if isinstance(padding, str) else tuple(tuple(p) for p in padding)


def _padding_tag(padding: Any) -> str:
    if isinstance(padding, str):
        return padding
    return "p" + "_".join(f"{lo}.{hi}" for lo, hi in padding)


def _pads(padding: Any, in_shape, window, strides) -> list[tuple[int, int]]:
    return [tuple(p) for p in jax.lax.padtype_to_pads(in_shape, window, strides, padding)] \
        if isinstance(padding, str) else [tuple(p) for p in padding]


def _numpy_conv(x: np.ndarray, kernel: np.ndarray, bias, strides, padding, groups) -> np.ndarray:
    """A float64 direct NHWC/HWIO convolution with feature groups."""
    x = x.astype(np.float64)
    kernel = kernel.astype(np.float64)
    kh, kw, cg, f = kernel.shape
    (plh, phh), (plw, phw) = _pads(padding, x.shape[1:3], (kh, kw), strides)
    xp = np.pad(x, ((0, 0), (plh, phh), (plw, phw), (0, 0)))
    oh = (xp.shape[1] - kh) // strides[0] + 1
    ow = (xp.shape[2] - kw) // strides[1] + 1
    fg = f // groups
    y = np.zeros((x.shape[0], oh, ow, f))
    for g in range(groups):
        xs = xp[..., g * cg:(g + 1) * cg]
        ks = kernel[..., g * fg:(g + 1) * fg]
        for i in range(oh):
            for j in range(ow):
                patch = xs[:, i * strides[0]:i * strides[0] + kh, j * strides[1]:j * strides[1] + kw]
                y[:, i, j, g * fg:(g + 1) * fg] = np.einsum("bhwc,hwcf->bf", patch, ks)
    return y + (0 if bias is None else bias.astype(np.float64))


def _conv_module(features, kernel_size, strides, padding, use_bias, groups) -> nn.Conv:
    return nn.Conv(features, tuple(kernel_size), strides=tuple(strides),
                   padding=_flax_padding(padding), use_bias=use_bias,
                   feature_group_count=groups)


def _conv_inputs(seed, x, features, kernel_size, strides, padding, use_bias, groups) -> dict:
    return {"seed": seed, "x": array(x, "float32"), "features": features,
            "kernel_size": list(kernel_size), "strides": list(strides),
            "padding": padding, "use_bias": use_bias, "feature_group_count": groups}


def _conv_id(problem, seed, xshape, features, kernel_size, strides, padding, use_bias,
             groups, xs) -> str:
    return (f"{problem}/seed{_tag(seed)}-x{shape_tag(xshape)}-f{features}"
            f"-k{shape_tag(kernel_size)}-s{shape_tag(strides)}-{_padding_tag(padding)}"
            f"{'' if use_bias else '-nobias'}-g{groups}-xs{xs}")


def case_conv(seed, xshape, features, kernel_size, strides, padding, use_bias, groups,
              xs) -> dict:
    x = draw_x(xshape, xs)
    model = _conv_module(features, kernel_size, strides, padding, use_bias, groups)
    variables = model.init(prng(seed), jnp.asarray(x))
    params = {k: _np(v) for k, v in variables["params"].items()}
    y = _np(model.apply(variables, jnp.asarray(x)))
    assert params["kernel"].shape == (*kernel_size, xshape[-1] // groups, features)
    tol = tolerance(int(np.prod(kernel_size)) * xshape[-1] // groups, [y])
    want = _numpy_conv(x, params["kernel"], params.get("bias"), strides, padding, groups)
    assert want.shape == y.shape, (want.shape, y.shape)
    limit = (tol["atol"] + tol["rtol"] * np.abs(want)) / 2
    assert np.all(np.abs(y - want) <= limit), f"conv differs from NumPy by {np.max(np.abs(y - want))}"
    expected = {"params": {k: array(v, "float32") for k, v in params.items()},
                "y": array(y, "float32")}
    return make_case(_conv_id("conv", seed, xshape, features, kernel_size, strides, padding,
                              use_bias, groups, xs), "conv",
                     _conv_inputs(seed, x, features, kernel_size, strides, padding, use_bias,
                                  groups), expected, **tol)


def case_conv_grad(seed, xshape, features, kernel_size, strides, padding, use_bias, groups,
                   xs) -> dict:
    x = draw_x(xshape, xs)
    model = _conv_module(features, kernel_size, strides, padding, use_bias, groups)
    params = model.init(prng(seed), jnp.asarray(x))["params"]

    def loss(p, xv):
        return jnp.sum(model.apply({"params": p}, xv) ** 2)

    value, (gp, gx) = jax.value_and_grad(loss, argnums=(0, 1))(params, jnp.asarray(x))
    grads = {"params": {k: _np(v) for k, v in gp.items()}, "x": _np(gx)}
    leaves = [_np(value), grads["x"], *grads["params"].values()]
    tol = tolerance(max(int(np.prod(kernel_size)) * xshape[-1], int(np.prod(xshape[:-1]))),
                    leaves)
    expected = {"loss": array(_np(value), "float32"),
                "grads": {"params": {k: array(v, "float32") for k, v in grads["params"].items()},
                          "x": array(grads["x"], "float32")}}
    return make_case(_conv_id("conv_grad", seed, xshape, features, kernel_size, strides, padding,
                              use_bias, groups, xs), "conv_grad",
                     _conv_inputs(seed, x, features, kernel_size, strides, padding, use_bias,
                                  groups), expected, **tol)


def _pool(kind: str, x, window, strides, padding):
    fn = nn.max_pool if kind == "max" else nn.avg_pool
    return fn(x, tuple(window), strides=tuple(strides), padding=_flax_padding(padding))


def _pool_inputs(x, kind, window, strides, padding) -> dict:
    return {"x": array(x, "float32"), "kind": kind, "window_shape": list(window),
            "strides": list(strides), "padding": padding}


def _no_ties(x: np.ndarray, window, strides, padding) -> bool:
    """No max-pool window holds two equal elements (padding aside)."""
    pads = [(0, 0), *_pads(padding, x.shape[1:3], window, strides), (0, 0)]
    xp = np.pad(x, pads, constant_values=np.nan)
    oh = (xp.shape[1] - window[0]) // strides[0] + 1
    ow = (xp.shape[2] - window[1]) // strides[1] + 1
    for i in range(oh):
        for j in range(ow):
            w = xp[:, i * strides[0]:i * strides[0] + window[0],
                   j * strides[1]:j * strides[1] + window[1]].transpose(0, 3, 1, 2)
            w = w.reshape(w.shape[0], w.shape[1], -1)
            for row in w.reshape(-1, w.shape[-1]):
                vals = row[~np.isnan(row)]
                if len(np.unique(vals)) != len(vals):
                    return False
    return True


def case_pool(problem, x, kind, window, strides, padding, xs) -> dict:
    if kind == "max":
        assert _no_ties(x, window, strides, padding), "tied max-pool window"
    xv = jnp.asarray(x)
    if problem == "pool":
        out = _np(_pool(kind, xv, window, strides, padding))
    else:
        out = _np(jax.grad(lambda v: jnp.sum(_pool(kind, v, window, strides, padding) ** 2))(xv))
    tol = tolerance(int(np.prod(window)), [out])
    case_id = (f"{problem}/{kind}-x{shape_tag(x.shape)}-w{shape_tag(window)}"
               f"-s{shape_tag(strides)}-{_padding_tag(padding)}-xs{xs}")
    return make_case(case_id, problem, _pool_inputs(x, kind, window, strides, padding),
                     array(out, "float32"), **tol)


def cases() -> list[dict]:
    """All convolution and pooling cases (cnn.json)."""
    SKIPPED.clear()
    out: list[dict] = []
    # ---- conv and conv_grad: (seed, x shape, features, kernel, strides, padding, bias,
    # groups, x draw seed)
    conv_grid = [
        (0, [2, 5, 5, 3], 4, [3, 3], [1, 1], "SAME", True, 1, 5000),
        (1, [1, 6, 7, 2], 3, [3, 2], [2, 2], "SAME", True, 1, 5001),
        (42, [3, 8, 8, 1], 8, [3, 3], [1, 1], "VALID", True, 1, 5002),
        (7, [2, 6, 6, 4], 6, [3, 3], [2, 1], [[1, 2], [0, 1]], False, 1, 5003),
        (3, [2, 5, 4, 4], 4, [2, 2], [1, 1], "SAME", True, 2, 5004),
        (-1, [1, 7, 7, 6], 6, [3, 3], [2, 2], "VALID", True, 3, 5005),
        (2**31 - 1, [4, 8, 8, 3], 16, [5, 5], [1, 1], "SAME", True, 1, 5006),
        (9, [2, 4, 9, 2], 2, [1, 3], [1, 3], [[0, 0], [2, 2]], True, 2, 5007),
    ]
    for args in conv_grid:
        out.append(case_conv(*args))
    for args in conv_grid:
        out.append(case_conv_grad(*args))
    # ---- pool and pool_grad: (kind, x shape, window, strides, padding, x draw seed)
    pool_grid = [
        ("max", [2, 6, 6, 3], [2, 2], [2, 2], "VALID", 6000),
        ("avg", [2, 6, 6, 3], [2, 2], [2, 2], "VALID", 6001),
        ("max", [1, 5, 7, 2], [3, 3], [1, 1], "SAME", 6002),
        ("avg", [1, 5, 7, 2], [3, 3], [1, 1], "SAME", 6003),
        ("max", [3, 7, 5, 1], [3, 2], [2, 1], [[1, 1], [0, 1]], 6004),
        ("avg", [3, 7, 5, 1], [3, 2], [2, 1], [[1, 1], [0, 1]], 6005),
        ("avg", [2, 8, 8, 4], [2, 2], [2, 2], "SAME", 6006),
        ("max", [2, 9, 9, 2], [3, 3], [2, 2], "SAME", 6007),
    ]
    for problem in ("pool", "pool_grad"):
        for kind, xshape, window, strides, padding, xs in pool_grid:
            x = draw_x(xshape, xs)
            out.append(case_pool(problem, x, kind, window, strides, padding, xs))
    return out
