"""Reference cases for the *module* problems of docs/refs-format.md.

Problems: ``mlp_init``, ``mlp_grad``, ``nn_checkpoint_forward``, ``nn_remat_policy``,
``checkpoint_forward``, ``nnx_mlp_init``, ``layernorm``, ``dropout`` and ``saved_residuals``
with ``function: "mlp_loss"`` (the other two ``saved_residuals`` functions belong to the remat
family, problems_remat.py). ``layernorm`` and ``dropout`` are generated, and their derivations
and self-checks described, in problems_nn_layers.py; the helpers both modules use are in
problems_nn_base.py. ``cases()`` here returns all of them, in nn.json's order.

Every expected value comes from the Flax/JAX call the registry names, eagerly (no
``jax.jit``), on exactly the float32 inputs written to the case:

* ``mlp_init``: ``MLP(features).init(jax.random.PRNGKey(seed), x)``
* ``mlp_grad``: ``M = MLP`` (spec ``"none"``) or ``nn.remat(MLP, policy=P)``;
  ``params = M(features).init(PRNGKey(seed), x)["params"]``;
  ``jax.value_and_grad(lambda p: jnp.sum(M(features).apply({"params": p}, x) ** 2))(params)``
* ``nn_checkpoint_forward``: ``nn.checkpoint(TwoLayerMLP)(features)``, init, apply, reshape(-1)
* ``nn_remat_policy``: ``nn.remat(ThreeLayerMLP, policy=dots_with_no_batch_dims_saveable)``
* ``checkpoint_forward`` / ``nnx_mlp_init``: ``NNXMLP(features, num_layers,
  rngs=nnx.Rngs(seed))`` (forward through its ``@nnx.remat``-decorated ``__call__``; the
  ``nnx.Param`` state)
* ``saved_residuals`` / ``mlp_loss``: ``jax._src.ad_checkpoint.saved_residuals(h, params, x)``
  with ``h = jax.checkpoint(lambda p, x: jnp.sum(MLP(features).apply({"params": p}, x) ** 2),
  policy=P)`` and ``params = MLP(features).init(PRNGKey(seed), x)["params"]``, encoded as
  problems_remat.py encodes it.

Integer inputs (``seed``, ``features``, ``num_layers``) may be written as integral floats
(``3.0``); the generator passes ``int(v)`` to Flax/JAX (``jax.random.PRNGKey(3.0)`` and
``nnx.Rngs(3.0)`` raise).

Self-checks run for every case (an AssertionError stops generation):

* parameter-key derivation: each linen ``Dense_i/kernel`` equals
  ``lecun_normal()(fold_in(PRNGKey(seed), H("Dense_i", 1)), shape)`` with ``H`` Flax's
  SHA-1 hash of the static path (semantics §3.2), each NNX ``layers[i].kernel`` equals
  ``lecun_normal()(fold_in(key(seed), 2 i), shape)``; biases are zeros;
  remat/checkpoint-wrapped linen models have the same parameters as unwrapped ones;
* robustness (the C++ side uses another BLAS and may differ by up to 4 ulp in the
  normal-family kernel draws): every float result is recomputed with NumPy float32 from
  kernels perturbed by random +-4 ulp, with OpenBLAS matmuls and sequential float32 sums;
  it must agree with JAX within half the case's tolerance; for ``mlp_grad`` every hidden
  pre-activation must be exactly 0 (zero rows of ``x``) or farther from 0 than 4x a
  forward error bound, so relu's gradient mask cannot flip.
"""

from __future__ import annotations

from typing import Any, Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from jax._src.ad_checkpoint import saved_residuals as jax_saved_residuals

import problems_nn_layers
from problems_nn_base import (NEG, S31, S32, STATS, _check_close, _np, _tag, as_int, draw_x,
                              feats_tag, flax_hash, prng, seq_sum)
from problems_random import NORMALISH, shape_tag
from problems_remat import (NOARG_POLICIES, OFFLOAD_DOTS, both, names, offload_names,
                            policy_from_spec, residual_kind, spec_tag, tolerance)
from refs_writer import array, make_case

#: Human-readable notes about inputs JAX rejected (filled while generating).
SKIPPED: list[str] = []

#: Every (description, kind) pair seen by saved_residuals/mlp_loss (diagnostics).
RESIDUAL_DESCRIPTIONS: dict[str, str] = {}

_EPS32 = float(np.finfo(np.float32).eps)


# --------------------------------------------------------------------------- models
# The exact model definitions the problems use (docs/refs-format.md defines them).


class MLP(nn.Module):
    """mlp_init / mlp_grad / saved_residuals(mlp_loss): Dense(h_i), relu between layers.
    ``dtype`` (default: the inputs') is each Dense's computation dtype, as in bench_jax.py."""
    features: Sequence[int]
    dtype: Any = None

    @nn.compact
    def __call__(self, x):
        for i, h in enumerate(self.features):
            x = nn.Dense(h, dtype=self.dtype)(x)
            if i != len(self.features) - 1:
                x = nn.relu(x)
        return x


class TwoLayerMLP(nn.Module):
    """nn_checkpoint_forward: Dense(F) -> relu -> Dense(F)."""
    features: int

    @nn.compact
    def __call__(self, x):
        x = nn.Dense(self.features)(x)
        x = nn.relu(x)
        x = nn.Dense(self.features)(x)
        return x


class ThreeLayerMLP(nn.Module):
    """nn_remat_policy: Dense(F) -> relu -> Dense(F) -> relu -> Dense(F)."""
    features: int

    @nn.compact
    def __call__(self, x):
        x = nn.Dense(self.features)(x)
        x = nn.relu(x)
        x = nn.Dense(self.features)(x)
        x = nn.relu(x)
        x = nn.Dense(self.features)(x)
        return x


class NNXMLP(nnx.Module):
    """checkpoint_forward / nnx_mlp_init: N x Linear(F, F), relu after every layer."""

    def __init__(self, features: int, num_layers: int, *, rngs: nnx.Rngs):
        self.layers = nnx.List([nnx.Linear(features, features, rngs=rngs)
                                for _ in range(num_layers)])

    @nnx.remat
    def __call__(self, x):
        for layer in self.layers:
            x = nnx.relu(layer(x))
        return x


# --------------------------------------------------------------------------- helpers


def perturb_ulps(a: np.ndarray, rng: np.random.Generator, k: int = 4) -> np.ndarray:
    """Move every element of float32 ``a`` by a random number of ulps in [-k, k]."""
    out = a.astype(np.float32).copy()
    steps = rng.integers(-k, k + 1, size=a.shape)
    for s in range(1, k + 1):
        up = steps >= s
        down = steps <= -s
        out[up] = np.nextafter(out[up], np.float32(np.inf))
        out[down] = np.nextafter(out[down], np.float32(-np.inf))
    return out


def np_forward(layers: Sequence[tuple[np.ndarray, np.ndarray]], x: np.ndarray,
               relu_last: bool) -> list[np.ndarray]:
    """float32 pre-activations z_l (OpenBLAS sgemm) of a Dense/Linear stack."""
    zs = []
    a = x.reshape(-1, x.shape[-1])
    for i, (k, b) in enumerate(layers):
        z = (a @ k + b).astype(np.float32)
        zs.append(z)
        a = np.maximum(z, np.float32(0)) if (relu_last or i != len(layers) - 1) else z
    return zs


def np_output(layers, x: np.ndarray, relu_last: bool) -> np.ndarray:
    z = np_forward(layers, x, relu_last)[-1]
    if relu_last:
        z = np.maximum(z, np.float32(0))
    return z.reshape(-1)


def perturbed(layers, seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(seed)
    return [(perturb_ulps(k, rng), b) for k, b in layers]


def linen_layers(params: dict) -> list[tuple[np.ndarray, np.ndarray]]:
    n = len(params)
    assert sorted(params) == sorted(f"Dense_{i}" for i in range(n)), sorted(params)
    return [(_np(params[f"Dense_{i}"]["kernel"]), _np(params[f"Dense_{i}"]["bias"])) for i in range(n)]


def check_linen_keys(seed: Any, params: dict) -> None:
    """Dense_i/kernel == lecun_normal(fold_in(PRNGKey(seed), H('Dense_i', 1))), bias == 0."""
    root = prng(seed)
    for i, (k, b) in enumerate(linen_layers(params)):
        key = jax.random.fold_in(root, flax_hash(f"Dense_{i}", 1))
        want = _np(jax.nn.initializers.lecun_normal()(key, k.shape, jnp.float32))
        assert np.array_equal(want, k), f"Dense_{i}/kernel key derivation differs"
        assert not np.any(b), "bias not zero"


def same_params(a: dict, b: dict) -> bool:
    la, ta = jax.tree_util.tree_flatten_with_path(a)
    lb, tb = jax.tree_util.tree_flatten_with_path(b)
    return ta == tb and all(pa == pb and np.array_equal(_np(va), _np(vb))
                            for (pa, va), (pb, vb) in zip(la, lb))


def params_json(params: dict) -> dict:
    return {name: {leaf: array(_np(v), "float32") for leaf, v in sub.items()}
            for name, sub in params.items()}


def width_of(*dims: int) -> int:
    return max([1, *[int(d) for d in dims]])


# --------------------------------------------------------------------------- problems


def case_mlp_init(seed: Any, x: np.ndarray, features: Sequence[Any], xseed: int) -> dict:
    feats = tuple(as_int(h) for h in features)
    variables = MLP(feats).init(prng(seed), jnp.asarray(x))
    assert list(variables) == ["params"], list(variables)
    params = variables["params"]
    check_linen_keys(seed, params)
    dims = [x.shape[-1], *feats]
    for i, (k, b) in enumerate(linen_layers(params)):
        assert k.shape == (dims[i], dims[i + 1]) and b.shape == (dims[i + 1],)
    case_id = f"mlp_init/seed{_tag(seed)}-x{shape_tag(x.shape)}-f{feats_tag(features)}-xs{xseed}"
    inputs = {"seed": seed, "x": array(x, "float32"), "features": list(features)}
    return make_case(case_id, "mlp_init", inputs, {"params": params_json(params)}, **NORMALISH)


def _relu_safe(layers, x: np.ndarray) -> bool:
    """Every hidden pre-activation is exactly 0 or farther from 0 than 4x its error bound.

    Forward error bound (float64 arithmetic on the float32 values): for z = a @ W + b,
    e_z = eps*(n + 4)*(|a| @ |W|) + e_a @ |W| -- n*eps for any summation order, 4*eps for
    kernels that differ by 4 ulp, plus the propagated error e_a of a; relu keeps e_z where
    z > 0 and zeroes it where z < 0 (safe ones only)."""
    a = x.reshape(-1, x.shape[-1]).astype(np.float64)
    a32 = x.reshape(-1, x.shape[-1])
    e_a = np.zeros_like(a)
    for i, (k, b) in enumerate(layers[:-1]):
        k64 = k.astype(np.float64)
        z = a @ k64 + b.astype(np.float64)
        z32 = a32 @ k + b
        e_z = _EPS32 * (k.shape[0] + 4) * (np.abs(a) @ np.abs(k64)) + e_a @ np.abs(k64)
        ok_zero = (z == 0) & (z32 == 0) & (e_z == 0)
        ok_far = np.abs(z) > 4 * e_z
        if not np.all(ok_zero | ok_far):
            return False
        a = np.maximum(z, 0.0)
        a32 = np.maximum(z32, np.float32(0))
        e_a = np.where(z > 0, e_z, 0.0)
    return True


def np_mlp_grad(layers, x: np.ndarray):
    """loss and grads of sum(MLP(x)**2) in NumPy float32 (x of rank 2)."""
    zs = np_forward(layers, x, relu_last=False)
    acts = [x] + [np.maximum(z, np.float32(0)) for z in zs[:-1]]
    y = zs[-1]
    loss = seq_sum(y * y)
    g = np.float32(2) * y
    grads = {}
    for i in range(len(layers) - 1, -1, -1):
        k, _ = layers[i]
        grads[f"Dense_{i}"] = {"kernel": (acts[i].T @ g).astype(np.float32),
                               "bias": np.sum(g, axis=0, dtype=np.float32)}
        if i:
            g = ((g @ k.T) * (zs[i - 1] > 0)).astype(np.float32)
    return np.float32(loss), grads


def case_mlp_grad(seed: Any, xshape: Sequence[int], features: Sequence[Any], spec: Any,
                  xseed: int, *, zero_rows: Sequence[int] = ()) -> dict | None:
    feats = tuple(as_int(h) for h in features)
    assert len(xshape) == 2
    # The draw of x is bumped until relu's gradient mask is robust (see _relu_safe).
    for xs in range(xseed, xseed + 1000):
        x = draw_x(xshape, xs, zero_rows=zero_rows)
        params0 = MLP(feats).init(prng(seed), jnp.asarray(x))["params"]
        if _relu_safe(linen_layers(params0), x):
            break
    else:
        raise RuntimeError(f"no relu-safe x for mlp_grad seed={seed} {xshape} {feats}")
    zr = ("-zrows" + "_".join(map(str, zero_rows))) if zero_rows else ""
    case_id = (f"mlp_grad/{spec_tag(spec)}-seed{_tag(seed)}-x{shape_tag(xshape)}"
               f"-f{feats_tag(features)}-xs{xs}{zr}")
    cls = MLP if spec == "none" else nn.remat(MLP, policy=policy_from_spec(spec))
    model = cls(feats)
    xj = jnp.asarray(x)
    try:
        params = model.init(prng(seed), xj)["params"]
        assert same_params(params, params0), "remat changed the parameters"
        loss, grads = jax.value_and_grad(
            lambda p: jnp.sum(model.apply({"params": p}, xj) ** 2))(params)
    except Exception as e:  # JAX/Flax rejects this policy
        SKIPPED.append(f"{case_id}: {type(e).__name__}: {e}")
        return None
    loss = _np(loss)
    assert loss.dtype == np.float32 and loss.shape == ()
    if spec != "none":  # diagnostics: does the policy change any bit of the result?
        plain = MLP(feats)
        l0, g0 = jax.value_and_grad(
            lambda p: jnp.sum(plain.apply({"params": p}, xj) ** 2))(params)
        same = np.array_equal(_np(l0), loss) and same_params(g0, grads)
        STATS["grad_policy_differs"] = STATS.get("grad_policy_differs", 0) + (not same)
    g_np = {n: {k: _np(v) for k, v in sub.items()} for n, sub in grads.items()}
    leaves = [loss] + [v for sub in g_np.values() for v in sub.values()]
    tol = tolerance(width_of(*xshape, *feats), leaves)
    ref_loss, ref = np_mlp_grad(perturbed(linen_layers(params), xs), x)
    _check_close(f"{case_id} loss", np.asarray(ref_loss), loss, tol)
    for n, sub in g_np.items():
        for k, v in sub.items():
            assert v.shape == ref[n][k].shape
            _check_close(f"{case_id} {n}/{k}", ref[n][k], v, tol)
    inputs = {"seed": seed, "x": array(x, "float32"), "features": list(features), "policy": spec}
    expected = {"loss": array(loss, "float32"),
                "grads": {"params": {n: {k: array(v, "float32") for k, v in sub.items()}
                                     for n, sub in g_np.items()}}}
    return make_case(case_id, "mlp_grad", inputs, expected, **tol)


def _linen_forward_case(problem: str, base: type, wrapped: type, seed: Any, x: np.ndarray,
                        features: Any, xseed: int) -> dict:
    F = as_int(features)
    xj = jnp.asarray(x)
    model = wrapped(F)
    variables = model.init(prng(seed), xj)
    assert list(variables) == ["params"]
    params = variables["params"]
    assert same_params(params, base(F).init(prng(seed), xj)["params"]), \
        "wrapping changed the parameters"
    check_linen_keys(seed, params)
    out = _np(model.apply(variables, xj).reshape(-1))
    assert out.dtype == np.float32 and out.size == x.size // x.shape[-1] * F
    tol = tolerance(width_of(x.shape[-1], F), [out])
    ref = np_output(perturbed(linen_layers(params), xseed), x, relu_last=False)
    case_id = f"{problem}/seed{_tag(seed)}-x{shape_tag(x.shape)}-F{_tag(features)}-xs{xseed}"
    _check_close(case_id, ref, out, tol)
    inputs = {"seed": seed, "x": array(x, "float32"), "features": features}
    return make_case(case_id, problem, inputs, array(out, "float32"), **tol)


def case_nn_checkpoint_forward(seed: Any, x: np.ndarray, features: Any, xseed: int) -> dict:
    return _linen_forward_case("nn_checkpoint_forward", TwoLayerMLP, nn.checkpoint(TwoLayerMLP),
                               seed, x, features, xseed)


def case_nn_remat_policy(seed: Any, x: np.ndarray, features: Any, xseed: int) -> dict:
    wrapped = nn.remat(ThreeLayerMLP,
                       policy=jax.checkpoint_policies.dots_with_no_batch_dims_saveable)
    return _linen_forward_case("nn_remat_policy", ThreeLayerMLP, wrapped, seed, x, features, xseed)


def nnx_model(seed: Any, features: Any, num_layers: Any) -> NNXMLP:
    return NNXMLP(as_int(features), as_int(num_layers), rngs=nnx.Rngs(as_int(seed)))


def nnx_params(model: NNXMLP) -> dict:
    """{"layers": {"0": {"kernel", "bias"}, ...}} from the nnx.Param state (int keys -> str)."""
    pure = nnx.to_pure_dict(nnx.state(model, nnx.Param))
    assert list(pure) == ["layers"], list(pure)
    layers = pure["layers"]
    assert sorted(layers) == list(range(len(layers))), list(layers)
    out = {}
    for i in range(len(layers)):
        assert sorted(layers[i]) == ["bias", "kernel"], sorted(layers[i])
        out[str(i)] = {"kernel": _np(layers[i]["kernel"]), "bias": _np(layers[i]["bias"])}
    return {"layers": out}


def check_nnx_keys(seed: Any, params: dict) -> None:
    """layers[i].kernel == lecun_normal(fold_in(key(seed), 2 i)) (bias key 2 i + 1 unused)."""
    root = jax.random.key(as_int(seed))
    for i, (name, sub) in enumerate(params["layers"].items()):
        assert name == str(i)
        key = jax.random.fold_in(root, 2 * i)
        want = _np(jax.nn.initializers.lecun_normal()(key, sub["kernel"].shape, jnp.float32))
        assert np.array_equal(want, sub["kernel"]), f"layers[{i}].kernel key derivation differs"
        assert not np.any(sub["bias"])


def case_checkpoint_forward(seed: Any, x: np.ndarray, features: Any, num_layers: Any,
                            xseed: int) -> dict:
    F, N = as_int(features), as_int(num_layers)
    assert x.shape[-1] == F
    model = nnx_model(seed, features, num_layers)
    params = nnx_params(model)
    check_nnx_keys(seed, params)
    xj = jnp.asarray(x)
    out = _np(model(xj).reshape(-1))
    # The same forward without remat and through the wrapped unbound method (semantics §4.4).
    plain = nnx_model(seed, features, num_layers)
    y_plain = jnp.asarray(xj)
    for layer in plain.layers:
        y_plain = nnx.relu(layer(y_plain))
    assert np.array_equal(_np(y_plain).reshape(-1), out), "nnx.remat changed the forward value"
    y_unbound = nnx.remat(NNXMLP.__call__)(plain, xj)
    assert np.array_equal(_np(y_unbound).reshape(-1), out)
    assert out.dtype == np.float32 and out.size == x.size
    tol = tolerance(width_of(F), [out])
    layers = [(v["kernel"], v["bias"]) for v in params["layers"].values()]
    assert len(layers) == N
    ref = np_output(perturbed(layers, xseed), x, relu_last=True)
    case_id = (f"checkpoint_forward/seed{_tag(seed)}-x{shape_tag(x.shape)}-F{_tag(features)}"
               f"-N{_tag(num_layers)}-xs{xseed}")
    _check_close(case_id, ref, out, tol)
    inputs = {"seed": seed, "x": array(x, "float32"), "features": features,
              "num_layers": num_layers}
    return make_case(case_id, "checkpoint_forward", inputs, array(out, "float32"), **tol)


def case_nnx_mlp_init(seed: Any, features: Any, num_layers: Any) -> dict:
    F, N = as_int(features), as_int(num_layers)
    params = nnx_params(nnx_model(seed, features, num_layers))
    check_nnx_keys(seed, params)
    assert len(params["layers"]) == N
    for sub in params["layers"].values():
        assert sub["kernel"].shape == (F, F) and sub["bias"].shape == (F,)
    case_id = f"nnx_mlp_init/seed{_tag(seed)}-F{_tag(features)}-N{_tag(num_layers)}"
    expected = {"layers": {i: {k: array(v, "float32") for k, v in sub.items()}
                           for i, sub in params["layers"].items()}}
    inputs = {"seed": seed, "features": features, "num_layers": num_layers}
    return make_case(case_id, "nnx_mlp_init", inputs, expected, **NORMALISH)


_DOT_POLICIES = {"dots_saveable", "checkpoint_dots", "dots_with_no_batch_dims_saveable",
                 "checkpoint_dots_with_no_batch_dims"}


def case_saved_residuals_mlp(seed: Any, x: np.ndarray, features: Sequence[Any], spec: Any,
                             xseed: int) -> dict | None:
    assert spec != "none" and spec is not None
    feats = tuple(as_int(h) for h in features)
    case_id = (f"saved_residuals/mlp_loss-{spec_tag(spec)}-seed{_tag(seed)}-x{shape_tag(x.shape)}"
               f"-f{feats_tag(features)}-xs{xseed}")
    model = MLP(feats)
    xj = jnp.asarray(x)
    params = model.init(prng(seed), xj)["params"]
    h = jax.checkpoint(lambda p, x: jnp.sum(model.apply({"params": p}, x) ** 2),
                       policy=policy_from_spec(spec))
    try:
        res = jax_saved_residuals(h, params, xj)
    except Exception as e:
        SKIPPED.append(f"{case_id}: {type(e).__name__}: {e}")
        return None
    expected = []
    for aval, desc in res:
        kind = residual_kind(desc)
        short = desc.split(" from /")[0] if " from /" in desc else desc
        RESIDUAL_DESCRIPTIONS.setdefault(short, kind)
        expected.append({"dtype": np.dtype(aval.dtype).name,
                         "shape": [int(s) for s in aval.shape], "kind": kind})
    # Sanity: every params leaf and x are arguments; the dot policies add one dot_general
    # output (x.shape[:-1] + (h_i,)) per layer; nothing else is saved for these policies.
    # (Two layers' dot outputs can print identically, so descriptions need not be unique.)
    lead = list(x.shape[:-1])
    want = [{"dtype": "float32", "shape": list(v.shape), "kind": "argument"}
            for v in jax.tree.leaves(params)]
    want.append({"dtype": "float32", "shape": list(x.shape), "kind": "argument"})
    if isinstance(spec, str) and spec in _DOT_POLICIES:
        want += [{"dtype": "float32", "shape": lead + [hh], "kind": "dot_general"} for hh in feats]
    key = lambda e: (e["kind"], e["dtype"], e["shape"])  # noqa: E731
    assert sorted(expected, key=key) == sorted(want, key=key), (case_id, expected)
    inputs = {"function": "mlp_loss", "policy": spec, "seed": seed, "x": array(x, "float32"),
              "features": list(features)}
    return make_case(case_id, "saved_residuals", inputs, expected, rtol=0, atol=0)


# --------------------------------------------------------------------------- case lists

MLP_GRAD_SPECS: list[Any] = [
    "none",
    *NOARG_POLICIES,
    names("save_only_these_names"),
    names("save_only_these_names", "a"),
    names("save_any_names_but_these"),
    names("save_any_names_but_these", "b", "c"),
    names("save_anything_except_these_names", "a"),
    offload_names(["a"], ["b"]),
    OFFLOAD_DOTS,
    both("dots_saveable", "nothing_saveable"),
    both(names("save_only_these_names", "a"), "dots_with_no_batch_dims_saveable"),
]

# (seed, x shape [B, D], features) for mlp_grad, cycled over the specs.
MLP_GRAD_SHAPES: list[tuple[Any, list[int], list[Any]]] = [
    (0, [4, 3], [5, 2]),
    (1, [1, 1], [1]),
    (-3, [3, 5], [4, 4, 3]),
    (S31, [8, 2], [7]),
    (42, [2, 6], [3, 1]),
    (-1, [5, 4], [8, 8, 8, 2]),
    (7, [6, 7], [2, 3, 4, 5, 6, 7, 8, 3]),
    (NEG, [3, 16], [16, 16]),
    (123456789, [7, 9], [11, 5]),
    (S32, [2, 4], [6, 6, 1]),
    (2**31 - 1, [9, 3], [32, 4]),
]

SAVED_RES_SPECS: list[Any] = [
    "nothing_saveable", "dots_saveable", "checkpoint_dots",
    "dots_with_no_batch_dims_saveable", "checkpoint_dots_with_no_batch_dims",
    names("save_only_these_names"),
    names("save_only_these_names", "a"),
    names("save_only_these_names", "a", "b", "c"),
    names("save_any_names_but_these"),
    names("save_any_names_but_these", "a"),
]


def cases() -> list[dict]:
    """All module cases (nn.json)."""
    SKIPPED.clear()
    STATS["max_err_over_tol"] = 0.0
    RESIDUAL_DESCRIPTIONS.clear()
    out: list[dict | None] = []

    # ---- mlp_init: (seed, x shape, features, x draw seed)
    for seed, xshape, feats, xs in [
        (0, [2, 3], [4, 2], 1000),
        (1, [3], [5], 1001),
        (-1, [4, 5], [8, 8, 3], 1002),
        (42, [2, 2, 6], [7, 1], 1003),
        (S31, [1, 4], [4, 4, 4, 4], 1004),
        (3.0, [3, 2], [3], 1005),
        (NEG, [5, 1], [1, 1, 1], 1006),
        (S32, [2, 7], [16, 16], 1007),
        (123456789, [6, 3], [2, 3, 4, 5, 6, 7, 8, 9], 1008),
        (7, [2, 300], [3], 1009),
        (8, [1, 2], [300], 1010),
        (9, [4, 33], [64, 10], 1011),
        (0, [2, 3], [4.0, 2], 1012),
        (-100, [3, 1, 5], [1], 1013),
        (2**31 - 1, [2, 17], [31, 32, 33], 1014),
        (5, [2, 4], [128, 64], 1015),
        (10, [1, 1], [1, 1, 1, 1, 1, 1, 1, 1], 1016),
        (-2**31, [1, 2, 3, 4], [6, 2], 1017),
    ]:
        out.append(case_mlp_init(seed, draw_x(xshape, xs), feats, xs))

    # ---- mlp_grad: every spec form on two shapes (one for the object specs), then
    # exact-zero probes (zero rows of x), a float seed and two larger cases.
    xs = 2000
    j = 0
    for spec in MLP_GRAD_SPECS:
        reps = 2 if isinstance(spec, str) else 1
        for _ in range(reps):
            seed, xshape, feats = MLP_GRAD_SHAPES[j % len(MLP_GRAD_SHAPES)]
            out.append(case_mlp_grad(seed, xshape, feats, spec, xs))
            j += 1
            xs += 10
    for spec in ("none", "nothing_saveable", "dots_with_no_batch_dims_saveable"):
        out.append(case_mlp_grad(11, [5, 4], [6, 3], spec, 2300, zero_rows=[0, 3]))
        out.append(case_mlp_grad(-12, [4, 2], [3, 3, 2], spec, 2310, zero_rows=[2]))
    out.append(case_mlp_grad(3.0, [3, 4], [5, 2], "dots_saveable", 2320))
    out.append(case_mlp_grad(0, [4, 3], [5.0, 2], "everything_saveable", 2330))
    out.append(case_mlp_grad(13, [16, 300], [8, 4], "dots_with_no_batch_dims_saveable", 2340))
    out.append(case_mlp_grad(14, [6, 48], [300, 3], "nothing_saveable", 2350))

    # ---- nn_checkpoint_forward / nn_remat_policy: (seed, x shape, F); ranks 1-3.
    fwd_shapes: list[tuple[Any, list[int], Any]] = [
        (0, [3], 4),
        (1, [2, 5], 7),
        (-1, [4, 3], 1),
        (42, [2, 3, 4], 6),
        (S31, [1, 1], 5),
        (3.0, [5, 2], 3),
        (7, [2, 6], 5.0),
        (NEG, [3, 2, 2], 8),
        (S32, [6, 8], 2),
        (123456789, [1, 9], 16),
        (-5, [7, 31], 32),
        (2**31 - 1, [2, 2, 17], 33),
        (11, [4, 64], 300),
        (12, [3, 300], 10),
        (13, [0, 4], 3),
        (7.0, [1], 1),
    ]
    for i, (seed, xshape, F) in enumerate(fwd_shapes):
        out.append(case_nn_checkpoint_forward(seed, draw_x(xshape, 3000 + i), F, 3000 + i))
    for i, (seed, xshape, F) in enumerate(fwd_shapes):
        xs = 3100 + i
        out.append(case_nn_remat_policy(seed, draw_x(xshape, xs, scale=2.0), F, xs))

    # ---- checkpoint_forward: (seed, x leading shape, F, N); x is f32[..., F].
    nnx_fwd: list[tuple[Any, list[int], Any, Any]] = [
        (0, [2], 3, 2),
        (1, [], 4, 1),
        (-1, [3], 5, 3),
        (42, [2, 3], 4, 2),
        (7.0, [2], 3.0, 2.0),
        (3.0, [4], 6, 4),
        (S31, [1], 1, 1),
        (NEG, [5], 2, 8),
        (S32, [2, 2], 7, 5),
        (123456789, [3], 8, 6),
        (-2, [], 16, 3.0),
        (2**31 - 1, [2], 17, 7),
        (5, [6], 32, 2),
        (9, [3], 33, 1),
        (10, [2, 2], 64, 3),
        (11, [2], 300, 1),
        (12, [1], 1, 8),
    ]
    for i, (seed, lead, F, N) in enumerate(nnx_fwd):
        xs = 4000 + i
        out.append(case_checkpoint_forward(seed, draw_x(lead + [as_int(F)], xs), F, N, xs))

    # ---- nnx_mlp_init: (seed, F, N)
    for seed, F, N in [
        (0, 3, 2), (1, 1, 1), (-1, 4, 3), (42, 5, 1), (7.0, 3.0, 2.0), (3.0, 2, 4),
        (S31, 6, 2), (NEG, 2, 8), (S32, 7, 3), (123456789, 8, 5), (-2, 16, 3.0),
        (2**31 - 1, 17, 2), (5, 32, 1), (9, 33, 2), (10, 1, 8), (11, 300, 1), (-2**31, 10, 6),
    ]:
        out.append(case_nnx_mlp_init(seed, F, N))
    # ---- layernorm, dropout (problems_nn_layers.py)
    out += problems_nn_layers.cases()

    # ---- saved_residuals / mlp_loss
    res_shapes: list[tuple[Any, list[int], list[Any]]] = [
        (0, [5, 3], [4, 2]),
        (1, [3], [5]),
        (-1, [2, 4, 3], [3, 3, 3]),
        (S31, [1, 1], [1]),
        (3.0, [4, 2], [6, 6]),
        (NEG, [8, 5], [2, 7, 1, 4]),
        (42, [2, 6], [3]),
        (S32, [3, 2, 2], [5, 5]),
    ]
    xs = 7000
    j = 0
    for spec in SAVED_RES_SPECS:
        for _ in range(2):
            seed, xshape, feats = res_shapes[j % len(res_shapes)]
            out.append(case_saved_residuals_mlp(seed, draw_x(xshape, xs), feats, spec, xs))
            j += 1
            xs += 1
    out.append(case_saved_residuals_mlp(5, draw_x([64, 32], 7100), [48, 16, 8], "dots_saveable",
                                        7100))
    out.append(case_saved_residuals_mlp(6, draw_x([2, 3], 7101),
                                        [2, 3, 4, 5, 6, 7, 8, 9], "dots_with_no_batch_dims_saveable",
                                        7101))

    return [c for c in out if c is not None]


# --------------------------------------------------------------------------- raw output


def print_raw_residuals() -> None:
    """JAX's own ``print_saved_residuals`` for mlp_loss (seed 0, x f32[5,3], features [4,2]).

    Run: ``JAX_PLATFORMS=cpu python_compat/.venv/bin/python python_compat/problems_nn.py``."""
    from jax.ad_checkpoint import print_saved_residuals

    x = jnp.asarray(draw_x([5, 3], 0))
    model = MLP((4, 2))
    params = model.init(jax.random.PRNGKey(0), x)["params"]
    for spec in ("nothing_saveable", "dots_saveable", names("save_only_these_names", "a")):
        print(f"--- mlp_loss, policy {spec_tag(spec)}, x f32[5,3], features [4,2]")
        h = jax.checkpoint(lambda p, x: jnp.sum(model.apply({"params": p}, x) ** 2),
                           policy=policy_from_spec(spec))
        print_saved_residuals(h, params, x)


if __name__ == "__main__":
    print_raw_residuals()
