"""Reference cases for batching (docs/refs-format.md, "Batching and sampling";
tests/refs/vmap.json).

Problems:

* ``ensemble``: ``nn.vmap(MLP, variable_axes={"params": 0}, split_rngs={"params": True},
  in_axes=None, out_axes=0, axis_size=E)`` of problems_nn's ``MLP(features)``, called inside a
  compact module (so its parameters sit under ``VmapMLP_0``), ``init(PRNGKey(seed), x)`` and
  ``apply`` on the same x. Expected ``{"params": ..., "y": f32[E, B, h_k]}``.
* ``per_example_grads``: ``jax.vmap(jax.grad(loss), in_axes=(None, 0, 0))(params, x, labels)``
  with ``loss(p, xi, yi)`` the mean ``optax.softmax_cross_entropy_with_integer_labels`` of
  ``MLP(features).apply({"params": p}, xi[None])`` against ``yi[None]``, and
  ``params = MLP(features).init(PRNGKey(seed), x[:1])["params"]``. Expected
  ``{"grads": {"params": ...}}``, every leaf with a leading axis B.

x is drawn from N(0, 1) (problems_nn_base.draw_x), bumped until every relu's mask is robust to
rounding (problems_nn._relu_safe, per member); labels from ``default_rng(xseed)``.

Self-checks (an AssertionError stops generation): member i of the ensemble draws Dense_j's
kernel from ``fold_in(split(PRNGKey(seed), E)[i], H("VmapMLP_0", "Dense_j", 1))`` (the split
params key, then the member's path, as nn.scan's layers), its biases are zero, and its output is
``MLP(features)``'s on x with its parameters (vmap is a map); row b of the
per-example gradients is ``jax.grad(loss)(params, x[b], labels[b])`` computed alone. Both
within half the case's tolerance.
"""

from __future__ import annotations

from typing import Any, Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax

from problems_nn import MLP, _relu_safe, linen_layers, params_json, width_of
from problems_nn_base import _np, _tag, as_int, draw_x, feats_tag, flax_hash, prng
from problems_random import shape_tag
from problems_remat import tolerance
from refs_writer import array, make_case

#: Human-readable notes about inputs JAX rejected (filled while generating).
SKIPPED: list[str] = []


class Ensemble(nn.Module):
    """E members of MLP(features) on the same input, their outputs stacked."""
    features: Sequence[int]
    members: int

    @nn.compact
    def __call__(self, x):
        lifted = nn.vmap(MLP, variable_axes={"params": 0}, split_rngs={"params": True},
                         in_axes=None, out_axes=0, axis_size=self.members)
        return lifted(self.features)(x)


def _member(params: dict, i: int) -> dict:
    return jax.tree_util.tree_map(lambda v: v[i], params)


def _close(label: str, got, want, tol: dict) -> None:
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    limit = (tol["atol"] + tol["rtol"] * np.abs(want)) / 2
    assert np.all(np.abs(got - want) <= limit), f"{label}: differs by {np.max(np.abs(got - want))}"


def case_ensemble(seed: Any, xshape: Sequence[int], features: Sequence[Any], members: int,
                  xseed: int) -> dict:
    feats = tuple(as_int(h) for h in features)
    model = Ensemble(feats, members)
    for xs in range(xseed, xseed + 1000):
        x = draw_x(xshape, xs)
        params = model.init(prng(seed), jnp.asarray(x))["params"]
        if all(_relu_safe(linen_layers(_member(params["VmapMLP_0"], i)), x)
               for i in range(members)):
            break
    else:
        raise RuntimeError(f"no relu-safe x for ensemble seed={seed} {xshape} {feats}")
    variables = model.init(prng(seed), jnp.asarray(x))
    assert list(variables) == ["params"] and list(variables["params"]) == ["VmapMLP_0"]
    params = variables["params"]
    y = _np(model.apply(variables, jnp.asarray(x)))
    assert y.shape == (members, *xshape[:-1], feats[-1]), y.shape
    tol = tolerance(width_of(*xshape, *feats), [y])
    # Member i: MLP(features) drawn from split(PRNGKey(seed), E)[i] at its own path (kernel
    # of Dense_j: lecun_normal(fold_in(key_i, H("VmapMLP_0", "Dense_j", 1))), bias zero), and
    # its output that MLP's on x.
    keys = jax.random.split(prng(seed), members)
    for i in range(members):
        mine = _member(params["VmapMLP_0"], i)
        for j, (k, b) in enumerate(linen_layers(mine)):
            key = jax.random.fold_in(keys[i], flax_hash("VmapMLP_0", f"Dense_{j}", 1))
            want = _np(jax.nn.initializers.lecun_normal()(key, k.shape, jnp.float32))
            assert np.array_equal(want, k), f"member {i} Dense_{j}/kernel key derivation differs"
            assert not np.any(b), "bias not zero"
        ref = MLP(feats).apply({"params": mine}, jnp.asarray(x))
        _close(f"ensemble member {i} output", y[i], _np(ref), tol)
    case_id = (f"ensemble/seed{_tag(seed)}-x{shape_tag(xshape)}-f{feats_tag(features)}"
               f"-e{members}-xs{xs}")
    inputs = {"seed": seed, "x": array(x, "float32"), "features": list(features),
              "members": members}
    expected = {"params": {"VmapMLP_0": params_json(params["VmapMLP_0"])},
                "y": array(y, "float32")}
    return make_case(case_id, "ensemble", inputs, expected, **tol)


def _loss(model, p, xi, yi):
    logits = model.apply({"params": p}, xi[None])
    return jnp.mean(optax.softmax_cross_entropy_with_integer_labels(logits, yi[None]))


def case_per_example_grads(seed: Any, xshape: Sequence[int], features: Sequence[Any],
                           xseed: int) -> dict:
    feats = tuple(as_int(h) for h in features)
    model = MLP(feats)
    for xs in range(xseed, xseed + 1000):
        x = draw_x(xshape, xs)
        params = model.init(prng(seed), jnp.asarray(x[:1]))["params"]
        if _relu_safe(linen_layers(params), x):
            break
    else:
        raise RuntimeError(f"no relu-safe x for per_example_grads seed={seed} {xshape} {feats}")
    labels = np.random.default_rng(xs).integers(0, feats[-1], size=xshape[0]).astype(np.int32)
    grad = jax.grad(lambda p, xi, yi: _loss(model, p, xi, yi))
    grads = jax.vmap(grad, in_axes=(None, 0, 0))(params, jnp.asarray(x), jnp.asarray(labels))
    g_np = {n: {k: _np(v) for k, v in sub.items()} for n, sub in grads.items()}
    leaves = [v for sub in g_np.values() for v in sub.values()]
    for v in leaves:
        assert v.dtype == np.float32 and v.shape[0] == xshape[0], v.shape
    tol = tolerance(width_of(*xshape, *feats), leaves)
    for b in range(xshape[0]):
        alone = grad(params, jnp.asarray(x[b]), jnp.asarray(labels[b]))
        for n, sub in alone.items():
            for k, v in sub.items():
                _close(f"per_example_grads row {b} {n}/{k}", g_np[n][k][b], _np(v), tol)
    case_id = (f"per_example_grads/seed{_tag(seed)}-x{shape_tag(xshape)}"
               f"-f{feats_tag(features)}-xs{xs}")
    inputs = {"seed": seed, "x": array(x, "float32"), "labels": array(labels, "int32"),
              "features": list(features)}
    expected = {"grads": {"params": {n: {k: array(v, "float32") for k, v in sub.items()}
                                     for n, sub in g_np.items()}}}
    return make_case(case_id, "per_example_grads", inputs, expected, **tol)


def cases() -> list[dict]:
    """All batching cases (vmap.json)."""
    SKIPPED.clear()
    out: list[dict] = []
    # ---- ensemble: (seed, x shape, features, members, x draw seed)
    for seed, xshape, feats, members, xs in [
        (0, [2, 3], [4, 2], 3, 3000),
        (1, [4, 5], [8, 3], 1, 3001),
        (42, [3, 4], [16, 16, 5], 4, 3002),
        (-1, [1, 6], [7], 2, 3003),
        (7, [5, 2, 3], [6, 4], 3, 3004),
        (2**31 - 1, [6, 33], [40, 10], 4, 3005),
    ]:
        out.append(case_ensemble(seed, xshape, feats, members, xs))
    # ---- per_example_grads: (seed, x shape, features, x draw seed)
    for seed, xshape, feats, xs in [
        (0, [4, 3], [5, 3], 4000),
        (1, [1, 2], [2], 4001),
        (42, [6, 8], [16, 16, 4], 4002),
        (-7, [3, 5], [10], 4003),
        (9, [8, 33], [40, 10], 4004),
    ]:
        out.append(case_per_example_grads(seed, xshape, feats, xs))
    return out
