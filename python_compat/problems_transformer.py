"""Reference cases for the *transformer* problems of docs/refs-format.md ("Transformers").

Problems: ``embed``, ``attention`` (causal or not, with and without dropout),
``block_grad`` (every policy spec form and ``"none"``), ``stack_init`` and ``stack_grad``
(``nn.scan`` over remat'd Blocks), and ``saved_residuals`` with ``function: "block_loss"``.
(``lm_train`` comes with the language model.)

Every expected value comes from the Flax/JAX call the registry names, eagerly (no
``jax.jit``), on exactly the inputs written to the case:

* ``embed``: ``nn.Embed(num_embeddings, features)``, ``init(PRNGKey(seed), tokens)``,
  ``apply``;
* ``attention``: ``nn.MultiHeadDotProductAttention(num_heads=H, dropout_rate=rate)`` as
  self-attention, ``mask = nn.make_causal_mask(jnp.ones((B, T)))`` if ``causal`` else None,
  ``init(PRNGKey(seed), x, mask=mask)`` (with ``deterministic=True`` when the rate is
  non-zero: Flax requires the flag there, and the parameters do not depend on it), then
  ``apply`` (with ``deterministic=False, rngs={"dropout": PRNGKey(dropout_seed)}`` when the
  rate is non-zero); expected ``{"params", "y"}``;
* ``block_grad``: ``lifted(policy)(num_heads, mlp_dim)`` with ``lifted`` and ``Block`` exactly
  as refs-format.md spells them, ``params = init(PRNGKey(seed), x)["params"]``,
  ``jax.value_and_grad(lambda p: jnp.sum(M.apply({"params": p}, x)[0] ** 2))(params)``;
* ``stack_init`` / ``stack_grad``: ``Stack(num_layers, num_heads, mlp_dim, policy)`` exactly
  as refs-format.md spells it, ``init(PRNGKey(seed), x)``; ``stack_grad`` adds
  ``jax.value_and_grad(lambda p: jnp.sum(Stack.apply({"params": p}, x) ** 2))(params)``;
* ``saved_residuals`` / ``block_loss``: ``jax._src.ad_checkpoint.saved_residuals(h, params,
  x)`` with ``h = jax.checkpoint(lambda p, x: jnp.sum(Block.apply({"params": p}, x)[0] ** 2),
  policy=P)`` and the plain Block's params, encoded as problems_remat.py encodes it.

Self-checks run for every case (an AssertionError stops generation):

* key derivation: the Embed table equals ``variance_scaling(1, "fan_in", "normal",
  out_axis=0)(fold_in(PRNGKey(seed), H(1)), (N, F))``; each attention projection kernel
  equals ``lecun_normal()(fold_in(PRNGKey(seed), H(name, 1)), flat shape)`` reshaped
  (DenseGeneral's flat draw), biases are zeros; the dropout mask is
  ``bernoulli(fold_in(PRNGKey(dropout_seed), H(1)), 1 - rate, (1, 1, T, T))``;
* remat-lifted Blocks have the same parameters as the plain Block (``CheckpointBlock`` as the
  root keeps the paths); a Stack's parameters do not depend on the policy (only the name of
  the scanned class does: ``ScanBlock_0`` for ``"none"``), every leaf is stacked along a
  leading axis of ``num_layers``, and layer ``i``'s parameters differ from layer ``j``'s;
* precision: ``attention``'s ``y`` is recomputed in NumPy float64 from the same parameters
  (and the same dropout mask), ``block_grad``'s loss and gradients by JAX in float64
  (``jax.enable_x64``) from the float32 parameters and ``x`` (``stack_grad`` likewise); JAX's float32 result must lie
  within a quarter of the case's tolerance of that, so that a float32 implementation with
  other summation orders (flaxpp's BLAS) has room;
* ``saved_residuals``: the listed residuals are the 16 parameter leaves and ``x`` as
  arguments plus, for the dot policies, the dot_general outputs refs-format.md names (q, k, v
  [B,T,H,hd], ``out`` [B,T,D], ``Dense_0`` [B,T,mlp_dim], ``Dense_1`` [B,T,D], and under
  ``dots_saveable`` the scores [B,H,T,T] and the weighted values [B,H,hd,T]); nothing else.

Tolerances: ``embed`` is a table of normal draws (``ulp: 4``, as the initialisers);
``attention`` and ``block_grad`` use the remat rule of problems_remat.py with ``d`` the
largest contraction length (D, T, mlp_dim): ``d <= 32``: ``rtol 2e-5``, ``atol 1e-6 *
max(1, max|expected|)``; otherwise ``rtol 1e-4``, ``atol 1e-5 * max(1, max|expected|)``, where
``max|expected|`` runs over ``y`` and the parameters (``attention``) or over the gradients
only (``block_grad``: the loss, a sum of B*T*D squares, is held by ``rtol``); plus ``ulp: 4``
for the parameter draws of ``attention``. ``stack_grad`` takes ``block_grad``'s tolerance times
``num_layers`` (rounding errors add up layer after layer); ``stack_init``'s parameters are
draws (``ulp: 4``).
"""

from __future__ import annotations

from typing import Any, Sequence

import flax
import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
from jax._src.ad_checkpoint import saved_residuals as jax_saved_residuals

from problems_nn_base import _np, _tag, as_int, draw_x, flax_hash, prng
from problems_random import NORMALISH, shape_tag
from problems_remat import (NOARG_POLICIES, OFFLOAD_DOTS, both, names, offload_names,
                            policy_from_spec, residual_records, spec_tag, tolerance)
from refs_writer import array, make_case

#: Human-readable notes about inputs JAX rejected (filled while generating).
SKIPPED: list[str] = []

#: Largest observed |JAX float32 - float64 reference| / tolerance (diagnostics).
STATS: dict[str, Any] = {"max_err_over_tol": 0.0, "max_err_case": ""}

#: Precision checks: JAX's float32 error must stay within this fraction of the tolerance.
ERR_FRACTION = 0.25


# --------------------------------------------------------------------------- models
# The exact model definitions of refs-format.md, "Transformers".


class Block(nn.Module):            # pre-LayerNorm GPT block; (carry, _) -> (carry, None) for nn.scan
    num_heads: int
    mlp_dim: int

    @nn.compact
    def __call__(self, x, _=None):  # x: f32[B, T, D]
        mask = nn.make_causal_mask(jnp.ones(x.shape[:-1], jnp.int32))
        h = nn.LayerNorm()(x)
        h = nn.MultiHeadDotProductAttention(num_heads=self.num_heads)(h, mask=mask)
        x = x + h
        h = nn.LayerNorm()(x)
        h = nn.gelu(nn.Dense(self.mlp_dim)(h))
        h = nn.Dense(x.shape[-1])(h)
        return x + h, None


def lifted(policy):                # "none": the block itself
    # (A module attribute holding a dict spec, Stack.policy, comes back as a FrozenDict.)
    spec = flax.core.unfreeze(policy) if isinstance(policy, flax.core.FrozenDict) else policy
    return Block if spec == "none" else nn.remat(Block, policy=policy_from_spec(spec),
                                                 prevent_cse=False)


class Stack(nn.Module):            # params auto-named ScanCheckpointBlock_0 (ScanBlock_0 for "none")
    num_layers: int
    num_heads: int
    mlp_dim: int
    policy: object = "none"

    @nn.compact
    def __call__(self, x):
        S = nn.scan(lifted(self.policy), variable_axes={"params": 0},
                    split_rngs={"params": True}, length=self.num_layers)
        x, _ = S(self.num_heads, self.mlp_dim)(x, None)
        return x


# --------------------------------------------------------------------------- helpers


def _tree_np(tree) -> dict:
    return jax.tree_util.tree_map(_np, tree)


def _json_tree(tree) -> Any:
    if isinstance(tree, dict):
        return {k: _json_tree(v) for k, v in tree.items()}
    return array(_np(tree), "float32")


def _max_abs(tree) -> float:
    return max([1.0] + [float(np.max(np.abs(v))) if v.size else 0.0
                        for v in jax.tree_util.tree_leaves(_tree_np(tree))])


def _check_precision(label: str, got32, ref64, tol: dict) -> None:
    """JAX's float32 ``got32`` within ERR_FRACTION of ``tol`` of the float64 ``ref64``."""
    g_leaves, g_def = jax.tree_util.tree_flatten(_tree_np(got32))
    r_leaves, r_def = jax.tree_util.tree_flatten(_tree_np(ref64))
    assert g_def == r_def, (label, g_def, r_def)
    worst = 0.0
    for g, r in zip(g_leaves, r_leaves):
        assert g.shape == r.shape, (label, g.shape, r.shape)
        err = np.abs(g.astype(np.float64) - r.astype(np.float64))
        allowed = tol["atol"] + tol["rtol"] * np.abs(r.astype(np.float64))
        if err.size:
            worst = max(worst, float(np.max(err / allowed)))
    if worst > STATS["max_err_over_tol"]:
        STATS["max_err_over_tol"], STATS["max_err_case"] = worst, label
    if worst > ERR_FRACTION:
        raise AssertionError(f"{label}: JAX float32 is {worst:.3g} x tolerance from float64")


def _x_tag(x: np.ndarray, xseed: int) -> str:
    return f"x{shape_tag(x.shape)}-xs{xseed}"


# --------------------------------------------------------------------------- embed


def case_embed(seed: Any, tokens: np.ndarray, num_embeddings: int, features: int) -> dict:
    model = nn.Embed(num_embeddings, features)
    toks = jnp.asarray(tokens, jnp.int32)
    variables = model.init(prng(seed), toks)
    table = _np(variables["params"]["embedding"])
    assert table.shape == (num_embeddings, features)
    init = jax.nn.initializers.variance_scaling(1.0, "fan_in", "normal", out_axis=0)
    want = _np(init(jax.random.fold_in(prng(seed), flax_hash(1)), table.shape, jnp.float32))
    assert np.array_equal(table, want), "Embed key derivation differs"
    y = _np(model.apply(variables, toks))
    assert np.array_equal(y, table[tokens]), "Embed lookup differs from table rows"
    case_id = (f"embed/seed{_tag(seed)}-tokens{shape_tag(tokens.shape)}-N{num_embeddings}"
               f"-F{features}")
    inputs = {"seed": seed, "tokens": array(tokens, "int32"), "num_embeddings": num_embeddings,
              "features": features}
    return make_case(case_id, "embed", inputs, array(y, "float32"), **NORMALISH)


def draw_tokens(shape: Sequence[int], num_embeddings: int, tseed: int) -> np.ndarray:
    """Ids in [0, N) from numpy.random.default_rng(tseed), with 0 and N-1 where room allows."""
    t = np.random.default_rng(tseed).integers(0, num_embeddings, size=tuple(shape), dtype=np.int32)
    flat = t.reshape(-1)
    if flat.size >= 2:
        flat[0], flat[-1] = 0, num_embeddings - 1
    return flat.reshape(t.shape)


# --------------------------------------------------------------------------- attention


def np_attention(params: dict, x: np.ndarray, num_heads: int, causal: bool,
                 keep: np.ndarray | None, keep_prob: float) -> np.ndarray:
    """MultiHeadDotProductAttention in NumPy float64 (an independent reference)."""
    p = {k: {n: _np(v).astype(np.float64) for n, v in sub.items()} for k, sub in params.items()}
    x64 = x.astype(np.float64)
    q = np.einsum("btd,dhk->bthk", x64, p["query"]["kernel"]) + p["query"]["bias"]
    k = np.einsum("btd,dhk->bthk", x64, p["key"]["kernel"]) + p["key"]["bias"]
    v = np.einsum("btd,dhk->bthk", x64, p["value"]["kernel"]) + p["value"]["bias"]
    depth = q.shape[-1]
    s = np.einsum("bqhd,bkhd->bhqk", q / np.sqrt(depth), k)
    if causal:
        T = x.shape[1]
        s = np.where(np.tril(np.ones((T, T), bool)), s, np.finfo(np.float32).min)
    s = s - s.max(axis=-1, keepdims=True)
    w = np.exp(s)
    w = w / w.sum(axis=-1, keepdims=True)
    if keep is not None:
        w = w * (keep.astype(np.float64) / np.float64(np.float32(keep_prob)))
    o = np.einsum("bhqk,bkhd->bqhd", w, v)
    return np.einsum("bqhd,hdo->bqo", o, p["out"]["kernel"]) + p["out"]["bias"]


def check_attention_keys(seed: Any, params: dict, D: int, H: int) -> None:
    root = prng(seed)
    lecun = jax.nn.initializers.lecun_normal()
    for name in ("query", "key", "value", "out"):
        kernel = _np(params[name]["kernel"])
        key = jax.random.fold_in(root, flax_hash(name, 1))
        want = _np(lecun(key, (D, D), jnp.float32)).reshape(kernel.shape)
        assert np.array_equal(kernel, want), f"{name}/kernel key derivation differs"
        assert not np.any(_np(params[name]["bias"])), f"{name}/bias not zero"
    assert params["query"]["kernel"].shape == (D, H, D // H)
    assert params["out"]["kernel"].shape == (H, D // H, D)


def case_attention(seed: Any, x: np.ndarray, num_heads: int, causal: bool, xseed: int,
                   dropout_rate: float = 0.0, dropout_seed: Any = None) -> dict:
    B, T, D = x.shape
    model = nn.MultiHeadDotProductAttention(num_heads=num_heads, dropout_rate=dropout_rate)
    xj = jnp.asarray(x)
    mask = nn.make_causal_mask(jnp.ones((B, T))) if causal else None
    if dropout_rate:
        variables = model.init(prng(seed), xj, mask=mask, deterministic=True)
        y = model.apply(variables, xj, mask=mask, deterministic=False,
                        rngs={"dropout": prng(dropout_seed)})
        keep_prob = 1.0 - dropout_rate
        keep = _np(jax.random.bernoulli(jax.random.fold_in(prng(dropout_seed), flax_hash(1)),
                                        keep_prob, (1, 1, T, T)))
    else:
        variables = model.init(prng(seed), xj, mask=mask)
        y = model.apply(variables, xj, mask=mask)
        keep, keep_prob = None, 1.0
    params = variables["params"]
    check_attention_keys(seed, params, D, num_heads)
    expected = {"params": _json_tree(params), "y": array(_np(y), "float32")}
    tol = tolerance(max(D, T), [_np(y)] + [_np(v) for v in jax.tree_util.tree_leaves(params)])
    label = (f"attention/seed{_tag(seed)}-{_x_tag(x, xseed)}-H{num_heads}"
             f"-{'causal' if causal else 'full'}"
             + (f"-drop{dropout_rate}-ds{_tag(dropout_seed)}" if dropout_rate else ""))
    _check_precision(label, _np(y), np_attention(params, x, num_heads, causal, keep, keep_prob),
                     tol)
    inputs = {"seed": seed, "x": array(x, "float32"), "num_heads": num_heads, "causal": causal}
    if dropout_rate:
        inputs.update({"dropout_rate": dropout_rate, "dropout_seed": dropout_seed})
    return make_case(label, "attention", inputs, expected, ulp=4, **tol)


# --------------------------------------------------------------------------- block_grad


def block_loss_and_grads(model, params, x):
    return jax.value_and_grad(lambda p: jnp.sum(model.apply({"params": p}, x)[0] ** 2))(params)


def case_block_grad(seed: Any, x: np.ndarray, num_heads: int, mlp_dim: int, spec: Any,
                    xseed: int) -> dict | None:
    label = (f"block_grad/{spec_tag(spec)}-seed{_tag(seed)}-{_x_tag(x, xseed)}-H{num_heads}"
             f"-M{mlp_dim}")
    xj = jnp.asarray(x)
    plain = Block(num_heads, mlp_dim)
    params = plain.init(prng(seed), xj)["params"]
    model = lifted(spec)(num_heads, mlp_dim)
    lifted_params = model.init(prng(seed), xj)["params"]
    assert jax.tree_util.tree_all(jax.tree_util.tree_map(
        lambda a, b: bool(np.array_equal(_np(a), _np(b))), params, lifted_params)), label
    try:
        loss, grads = block_loss_and_grads(model, lifted_params, xj)
    except Exception as e:  # e.g. an offload policy JAX cannot run on the CPU
        SKIPPED.append(f"{label}: {type(e).__name__}: {e}")
        return None
    with jax.enable_x64(True):
        p64 = jax.tree_util.tree_map(lambda v: jnp.asarray(_np(v), jnp.float64), params)
        loss64, grads64 = block_loss_and_grads(plain, p64, jnp.asarray(x, jnp.float64))
        loss64, grads64 = _np(loss64), _tree_np(grads64)
    got = {"loss": loss, "grads": {"params": grads}}
    # atol from the gradients' magnitude (the loss, a sum of B*T*D squares, is far larger and
    # is held by rtol).
    tol = tolerance(max(x.shape[-1], x.shape[1], mlp_dim),
                    [_np(v) for v in jax.tree_util.tree_leaves(grads)])
    _check_precision(label, got, {"loss": loss64, "grads": {"params": grads64}}, tol)
    inputs = {"seed": seed, "x": array(x, "float32"), "num_heads": num_heads, "mlp_dim": mlp_dim,
              "policy": spec}
    expected = {"loss": array(_np(loss), "float32"), "grads": {"params": _json_tree(grads)}}
    return make_case(label, "block_grad", inputs, expected, **tol)


# --------------------------------------------------------------------------- stack_*


def _stack_params(seed: Any, x: np.ndarray, L: int, H: int, M: int, spec: Any, label: str):
    """Stack's params, checked: independent of the policy, stacked, layers distinct."""
    xj = jnp.asarray(x)
    params = Stack(L, H, M, spec).init(prng(seed), xj)["params"]
    scanned = "ScanBlock_0" if spec == "none" else "ScanCheckpointBlock_0"
    assert list(params) == [scanned], (label, list(params))
    if spec != "none":  # the scanned class's name enters the keys; the policy does not
        other = Stack(L, H, M, "everything_saveable").init(prng(seed), xj)["params"]
        assert jax.tree_util.tree_all(jax.tree_util.tree_map(
            lambda a, b: bool(np.array_equal(_np(a), _np(b))), params, other)), label
    for v in jax.tree_util.tree_leaves(params):
        assert v.shape[0] == L, (label, v.shape)
    kernel = _np(params[scanned]["Dense_0"]["kernel"])
    assert L == 1 or not np.array_equal(kernel[0], kernel[1]), label
    return params


def _stack_tag(seed, x, L, H, M, spec, xseed) -> str:
    return (f"{spec_tag(spec)}-seed{_tag(seed)}-{_x_tag(x, xseed)}-L{L}-H{H}-M{M}")


def case_stack_init(seed: Any, x: np.ndarray, L: int, H: int, M: int, spec: Any,
                    xseed: int) -> dict:
    label = f"stack_init/{_stack_tag(seed, x, L, H, M, spec, xseed)}"
    params = _stack_params(seed, x, L, H, M, spec, label)
    inputs = {"seed": seed, "x": array(x, "float32"), "num_layers": L, "num_heads": H,
              "mlp_dim": M, "policy": spec}
    return make_case(label, "stack_init", inputs, {"params": _json_tree(params)},
                     ulp=4, rtol=0, atol=0)


def stack_loss_and_grads(model, params, x):
    return jax.value_and_grad(lambda p: jnp.sum(model.apply({"params": p}, x) ** 2))(params)


def case_stack_grad(seed: Any, x: np.ndarray, L: int, H: int, M: int, spec: Any,
                    xseed: int) -> dict | None:
    label = f"stack_grad/{_stack_tag(seed, x, L, H, M, spec, xseed)}"
    params = _stack_params(seed, x, L, H, M, spec, label)
    model = Stack(L, H, M, spec)
    try:
        loss, grads = stack_loss_and_grads(model, params, jnp.asarray(x))
    except Exception as e:  # e.g. an offload policy JAX cannot run on the CPU
        SKIPPED.append(f"{label}: {type(e).__name__}: {e}")
        return None
    with jax.enable_x64(True):
        p64 = jax.tree_util.tree_map(lambda v: jnp.asarray(_np(v), jnp.float64), params)
        loss64, grads64 = stack_loss_and_grads(Stack(L, H, M, "none"), _rename_scanned(p64),
                                               jnp.asarray(x, jnp.float64))
        loss64, grads64 = _np(loss64), _rename_scanned(_tree_np(grads64), back=spec != "none")
    got = {"loss": loss, "grads": {"params": grads}}
    # Rounding errors add up layer after layer: the block's tolerance times the depth.
    tol = {k: float(f"{v * L:.3g}") for k, v in tolerance(max(x.shape[-1], x.shape[1], M),
                                          [_np(v) for v in jax.tree_util.tree_leaves(grads)]).items()}
    _check_precision(label, got, {"loss": loss64, "grads": {"params": grads64}}, tol)
    inputs = {"seed": seed, "x": array(x, "float32"), "num_layers": L, "num_heads": H,
              "mlp_dim": M, "policy": spec}
    expected = {"loss": array(_np(loss), "float32"), "grads": {"params": _json_tree(grads)}}
    return make_case(label, "stack_grad", inputs, expected, **tol)


def _rename_scanned(params: dict, back: bool = False) -> dict:
    """The float64 check runs the plain ("none") Stack: its scanned class is ScanBlock_0."""
    (name, inner), = params.items()
    return {("ScanCheckpointBlock_0" if back else "ScanBlock_0"): inner}


# --------------------------------------------------------------------------- saved_residuals

_DOT_POLICIES = {"dots_saveable", "checkpoint_dots", "dots_with_no_batch_dims_saveable",
                 "checkpoint_dots_with_no_batch_dims"}
_BATCHED_DOT_POLICIES = {"dots_saveable", "checkpoint_dots"}


def block_residuals_want(params: dict, x: np.ndarray, num_heads: int, mlp_dim: int,
                         spec: Any) -> list[dict]:
    """refs-format.md's list: arguments, plus the dot outputs the dot policies save."""
    B, T, D = x.shape
    hd = D // num_heads
    want = [{"dtype": "float32", "shape": list(v.shape), "kind": "argument"}
            for v in jax.tree_util.tree_leaves(params)]
    want.append({"dtype": "float32", "shape": list(x.shape), "kind": "argument"})
    if isinstance(spec, str) and spec in _DOT_POLICIES:
        dots = [[B, T, num_heads, hd]] * 3 + [[B, T, D], [B, T, mlp_dim], [B, T, D]]
        if spec in _BATCHED_DOT_POLICIES:
            dots += [[B, num_heads, T, T], [B, num_heads, hd, T]]
        want += [{"dtype": "float32", "shape": s, "kind": "dot_general"} for s in dots]
    return want


def case_saved_residuals_block(seed: Any, x: np.ndarray, num_heads: int, mlp_dim: int, spec: Any,
                               xseed: int) -> dict:
    assert spec != "none" and spec is not None
    label = (f"saved_residuals/block_loss-{spec_tag(spec)}-seed{_tag(seed)}-{_x_tag(x, xseed)}"
             f"-H{num_heads}-M{mlp_dim}")
    model = Block(num_heads, mlp_dim)
    xj = jnp.asarray(x)
    params = model.init(prng(seed), xj)["params"]
    h = jax.checkpoint(lambda p, x: jnp.sum(model.apply({"params": p}, x)[0] ** 2),
                       policy=policy_from_spec(spec))
    expected = residual_records(jax_saved_residuals(h, params, xj))
    key = lambda e: (e["kind"], e["dtype"], e["shape"])  # noqa: E731
    want = block_residuals_want(params, x, num_heads, mlp_dim, spec)
    assert sorted(expected, key=key) == sorted(want, key=key), (label, expected)
    inputs = {"function": "block_loss", "policy": spec, "seed": seed, "x": array(x, "float32"),
              "num_heads": num_heads, "mlp_dim": mlp_dim}
    return make_case(label, "saved_residuals", inputs, expected, rtol=0, atol=0)


# --------------------------------------------------------------------------- case lists

S31 = 2**31 + 5  # >= 2^31: PRNGKey with x64 off gives [0, seed mod 2^32]

BLOCK_GRAD_SPECS: list[Any] = [
    "none",
    *NOARG_POLICIES,
    names("save_only_these_names", "a"),
    names("save_any_names_but_these", "b"),
    names("save_anything_except_these_names", "a"),
    offload_names([], ["a"]),
    OFFLOAD_DOTS,
    both("dots_saveable", "nothing_saveable"),
]

SAVED_RES_SPECS: list[Any] = [
    "nothing_saveable", "dots_saveable", "checkpoint_dots",
    "dots_with_no_batch_dims_saveable", "checkpoint_dots_with_no_batch_dims",
    names("save_only_these_names", "a"),
    names("save_any_names_but_these"),
]


def cases() -> list[dict]:
    """All transformer cases (transformer.json)."""
    SKIPPED.clear()
    STATS["max_err_over_tol"], STATS["max_err_case"] = 0.0, ""
    out: list[dict | None] = []

    # ---- embed: (seed, token shape, num_embeddings, features)
    for i, (seed, shape, N, F) in enumerate([
        (0, [5], 10, 4),
        (1, [2, 3], 7, 8),
        (-3, [2, 3, 4], 50, 16),
        (S31, [], 3, 5),
        (3.0, [6], 1, 3),
        (42, [4, 8], 100, 32),
        (7, [0], 4, 2),
        (123456789, [3, 1], 2, 1),
    ]):
        out.append(case_embed(seed, draw_tokens(shape, N, 100 + i), N, F))

    # ---- attention: (seed, [B, T, D], H, causal, dropout rate, dropout seed)
    for i, (seed, shape, H, causal, rate, dseed) in enumerate([
        (0, [2, 3, 8], 2, False, 0.0, None),
        (0, [2, 3, 8], 2, True, 0.0, None),
        (1, [1, 1, 4], 1, True, 0.0, None),
        (-3, [2, 5, 12], 3, True, 0.0, None),
        (S31, [3, 4, 6], 6, False, 0.0, None),
        (42, [1, 7, 16], 4, True, 0.0, None),
        (7, [2, 6, 32], 8, False, 0.0, None),
        (3.0, [2, 9, 20], 5, True, 0.0, None),
        (5, [2, 4, 8], 2, False, 0.5, 11),
        (6, [2, 5, 12], 3, True, 0.1, 12),
        (8, [1, 8, 16], 4, True, 0.3, -1),
        (9, [3, 3, 6], 1, False, 0.9, S31),
    ]):
        xs = 200 + i
        out.append(case_attention(seed, draw_x(shape, xs), H, causal, xs, rate, dseed))

    # ---- block_grad: every spec on a small block, the simplest ones on larger ones too
    shapes = [(0, [2, 3, 8], 2, 16), (1, [1, 5, 12], 3, 24)]
    xs = 300
    for j, spec in enumerate(BLOCK_GRAD_SPECS):
        seed, shape, H, M = shapes[j % len(shapes)]
        out.append(case_block_grad(seed, draw_x(shape, xs), H, M, spec, xs))
        xs += 1
    for spec in ("none", "dots_with_no_batch_dims_saveable", "nothing_saveable"):
        out.append(case_block_grad(S31, draw_x([1, 4, 6], xs), 6, 5, spec, xs))
        xs += 1
    out.append(case_block_grad(-3, draw_x([2, 8, 32], xs), 4, 64,
                               "dots_with_no_batch_dims_saveable", xs))
    out.append(case_block_grad(3.0, draw_x([1, 16, 24], xs + 1), 3, 40, "nothing_saveable", xs + 1))

    # ---- stack_init / stack_grad: (seed, [B, T, D], layers, heads, mlp_dim)
    stacks = [(0, [2, 3, 8], 2, 2, 16), (-3, [1, 5, 12], 3, 3, 24), (S31, [2, 4, 6], 1, 6, 5),
              (3.0, [1, 6, 12], 4, 4, 16)]
    xs = 500
    for j, spec in enumerate(["none", "nothing_saveable", "dots_with_no_batch_dims_saveable",
                              "dots_saveable"]):
        seed, shape, L, H, M = stacks[j % len(stacks)]
        out.append(case_stack_init(seed, draw_x(shape, xs), L, H, M, spec, xs))
        xs += 1
    for j, spec in enumerate(["none", "everything_saveable", "nothing_saveable", "dots_saveable",
                              "dots_with_no_batch_dims_saveable", OFFLOAD_DOTS,
                              names("save_only_these_names", "a")]):
        seed, shape, L, H, M = stacks[j % len(stacks)]
        out.append(case_stack_grad(seed, draw_x(shape, xs), L, H, M, spec, xs))
        xs += 1
    out.append(case_stack_grad(1, draw_x([2, 8, 16], xs), 6, 4, 32, "nothing_saveable", xs))

    # ---- saved_residuals / block_loss
    res_shapes = [(0, [2, 3, 8], 2, 16), (1, [1, 5, 12], 3, 7), (-3, [3, 4, 6], 6, 10)]
    xs = 400
    for spec in SAVED_RES_SPECS:
        for seed, shape, H, M in res_shapes[:2]:
            out.append(case_saved_residuals_block(seed, draw_x(shape, xs), H, M, spec, xs))
            xs += 1
    for spec in ("dots_saveable", "dots_with_no_batch_dims_saveable"):
        seed, shape, H, M = res_shapes[2]
        out.append(case_saved_residuals_block(seed, draw_x(shape, xs), H, M, spec, xs))
        xs += 1

    return [c for c in out if c is not None]


# --------------------------------------------------------------------------- raw output


def print_raw_residuals() -> None:
    """JAX's own ``print_saved_residuals`` for block_loss (seed 0, x f32[2,3,8], H 2, M 16).

    Run: ``JAX_PLATFORMS=cpu python_compat/.venv/bin/python python_compat/problems_transformer.py``.
    """
    from jax.ad_checkpoint import print_saved_residuals

    x = jnp.asarray(draw_x([2, 3, 8], 0))
    model = Block(2, 16)
    params = model.init(jax.random.PRNGKey(0), x)["params"]
    for spec in ("nothing_saveable", "dots_with_no_batch_dims_saveable", "dots_saveable"):
        print(f"--- block_loss, policy {spec_tag(spec)}, x f32[2,3,8], num_heads 2, mlp_dim 16")
        h = jax.checkpoint(lambda p, x: jnp.sum(model.apply({"params": p}, x)[0] ** 2),
                           policy=policy_from_spec(spec))
        print_saved_residuals(h, params, x)


if __name__ == "__main__":
    print_raw_residuals()
