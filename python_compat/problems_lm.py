"""Reference cases for the *language-model* problem ``lm_train`` of docs/refs-format.md
("Transformers").

``lm_train``: ``LM(vocab, features, num_layers, num_heads, mlp_dim, max_len=T, policy)``
exactly as refs-format.md spells it (``Stack`` and ``Block`` from problems_transformer.py),
trained with optax on next-token prediction:

* ``params = LM(...).init(PRNGKey(seed), tokens[:batch_size, :-1])["params"]``;
* ``tx = tx_from_spec(optimizer)`` (problems_train.py: the optimiser object of train_mlp);
* step ``i`` takes the rows ``(i*bs + j) mod N`` of ``tokens`` and runs, under one
  ``jax.jit``, ``value_and_grad`` of the mean
  ``optax.softmax_cross_entropy_with_integer_labels(apply(params, batch[:, :-1]),
  batch[:, 1:])``, ``tx.update`` and ``optax.apply_updates``; ``losses[i]`` is the loss before
  update ``i``;
* ``expected = {"losses": f32[steps], "params": ...}`` with the parameters after the last
  update.

Data: short sequences of a toy language from ``numpy.random.default_rng(dseed)`` (the
``ds<k>`` part of the case id): each row counts up from a random start by a random stride
(mod ``vocab``), with one token in ten replaced at random, so that the loss falls quickly and
the trajectory is not dominated by noise.

Robustness check, run for every case: the trajectory re-run in JAX with the loss computed as
``-mean(take_along_axis(log_softmax(z), y))`` (another, equivalent summation) stays within
``CHAOS_LIMIT`` x the case tolerance (rtol 1e-3, atol 1e-5 x the largest |loss| or
|parameter|, as train_mlp). The check is what chose the optimisers' ``eps``: the key
projection's bias has no gradient (a shift of every key by one vector moves all of a query's
scores equally, and softmax ignores that), only rounding noise, which Adam-type optimisers with
optax's default ``eps`` (1e-8) turn into full steps of either sign (158 x tol on the first
case); the Adam-type cases set ``eps: 1e-3``, where such noise moves nothing.
"""

from __future__ import annotations

from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax

from problems_nn_base import _np, _tag, prng
from problems_remat import _round_up, spec_tag
from problems_train import CHAOS_LIMIT, RTOL, batch_rows, opt_tag, tx_from_spec
from problems_transformer import Stack
from refs_writer import array, make_case

#: Human-readable notes about inputs JAX rejected (filled while generating).
SKIPPED: list[str] = []
NOTES: list[str] = []


class LM(nn.Module):               # tokens: int32[B, T]
    vocab: int
    features: int
    num_layers: int
    num_heads: int
    mlp_dim: int
    max_len: int
    policy: object = "none"

    @nn.compact
    def __call__(self, tokens):
        x = nn.Embed(self.vocab, self.features)(tokens)
        pos = self.param("pos_embedding", nn.initializers.normal(0.02), (self.max_len, self.features))
        x = x + pos[: tokens.shape[-1]]
        x = Stack(self.num_layers, self.num_heads, self.mlp_dim, self.policy)(x)
        return nn.Dense(self.vocab)(nn.LayerNorm()(x))


def make_tokens(N: int, T1: int, vocab: int, dseed: int) -> np.ndarray:
    rng = np.random.default_rng(dseed)
    start = rng.integers(0, vocab, size=N)
    stride = rng.integers(1, 4, size=N)
    tokens = (start[:, None] + stride[:, None] * np.arange(T1)[None, :]) % vocab
    noise = rng.random((N, T1)) < 0.1
    tokens[noise] = rng.integers(0, vocab, size=int(noise.sum()))
    return tokens.astype(np.int32)


def _loss_optax(logits, targets):
    return optax.softmax_cross_entropy_with_integer_labels(logits, targets).mean()


def _loss_log_softmax(logits, targets):
    lp = jax.nn.log_softmax(logits, axis=-1)
    return -jnp.mean(jnp.take_along_axis(lp, targets[..., None], axis=-1))


def jax_lm_train(seed: Any, tokens: np.ndarray, sizes: dict, opt: dict, steps: int, bs: int,
                 policy: Any, loss_fn=_loss_optax):
    N, T = tokens.shape[0], tokens.shape[1] - 1
    model = LM(max_len=T, policy=policy, **sizes)
    params = model.init(prng(seed), jnp.asarray(tokens[:bs, :-1]))["params"]
    tx = tx_from_spec(opt)
    opt_state = tx.init(params)

    @jax.jit
    def step(params, opt_state, batch):
        loss, grads = jax.value_and_grad(
            lambda p: loss_fn(model.apply({"params": p}, batch[:, :-1]), batch[:, 1:]))(params)
        updates, opt_state = tx.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss

    losses = []
    for i in range(steps):
        params, opt_state, loss = step(params, opt_state, jnp.asarray(tokens[batch_rows(i, bs, N)]))
        losses.append(_np(loss))
    return np.array(losses, dtype=np.float32), jax.tree_util.tree_map(_np, params)


def _tolerance(losses: np.ndarray, params) -> dict:
    m = max([1.0, float(np.max(np.abs(losses)))]
            + [float(np.max(np.abs(v))) for v in jax.tree_util.tree_leaves(params)])
    return {"rtol": RTOL, "atol": _round_up(1e-5 * m)}


def _ratio(got, want, tol) -> float:
    worst = 0.0
    for g, w in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
        g64, w64 = np.asarray(g, np.float64), np.asarray(w, np.float64)
        assert g64.shape == w64.shape and np.all(np.isfinite(g64)) and np.all(np.isfinite(w64))
        err = np.abs(g64 - w64) / (tol["atol"] + tol["rtol"] * np.abs(w64))
        worst = max(worst, float(np.max(err)) if err.size else 0.0)
    return worst


def _json_tree(tree) -> Any:
    if isinstance(tree, dict):
        return {k: _json_tree(v) for k, v in tree.items()}
    return array(tree, "float32")


def case_lm_train(seed: Any, N: int, T: int, sizes: dict, opt: dict, steps: int, bs: int,
                  policy: Any, dseed: int) -> dict | None:
    tokens = make_tokens(N, T + 1, sizes["vocab"], dseed)
    tag = "-".join(f"{k[0]}{v}" for k, v in sizes.items())
    case_id = (f"lm_train/{opt_tag(opt)}-{spec_tag(policy)}-seed{_tag(seed)}-N{N}-T{T}-{tag}"
               f"-bs{bs}-S{steps}-ds{dseed}")
    try:
        losses, params = jax_lm_train(seed, tokens, sizes, opt, steps, bs, policy)
    except Exception as e:  # JAX/optax rejects this input
        SKIPPED.append(f"{case_id}: {type(e).__name__}: {e}")
        return None
    tol = _tolerance(losses, params)
    l2, p2 = jax_lm_train(seed, tokens, sizes, opt, steps, bs, policy, loss_fn=_loss_log_softmax)
    r = _ratio((l2, p2), (losses, params), tol)
    assert r <= CHAOS_LIMIT, f"{case_id}: the log_softmax loss drifts {r:.3g} x tol"
    NOTES.append(f"{case_id}: loss {losses[0]:.4g} -> {losses[-1]:.4g}, drift/tol {r:.2g}")
    inputs = {"seed": seed, "tokens": array(tokens, "int32"), **sizes, "policy": policy,
              "optimizer": opt, "steps": steps, "batch_size": bs}
    expected = {"losses": array(losses, "float32"), "params": _json_tree(params)}
    return make_case(case_id, "lm_train", inputs, expected, **tol)


def cases() -> list[dict]:
    """All lm_train cases (lm.json)."""
    SKIPPED.clear()
    NOTES.clear()
    small = {"vocab": 11, "features": 16, "num_layers": 2, "num_heads": 2, "mlp_dim": 32}
    one = {"vocab": 7, "features": 8, "num_layers": 1, "num_heads": 1, "mlp_dim": 16}
    three = {"vocab": 13, "features": 12, "num_layers": 3, "num_heads": 3, "mlp_dim": 24}
    out = [
        case_lm_train(0, 24, 8, small, {"name": "adam", "learning_rate": 3e-3, "eps": 1e-3}, 20, 8,
                      "nothing_saveable", 1),
        case_lm_train(-3, 24, 8, small, {"name": "sgd", "learning_rate": 0.1}, 20, 8, "none", 2),
        case_lm_train(2**31 + 5, 20, 6, three,
                      {"name": "adamw", "weight_decay": 0.01, "eps": 1e-3, "clip_by_global_norm": 1.0,
                       "learning_rate": {"name": "warmup_cosine_decay", "init_value": 0.0,
                                         "peak_value": 3e-3, "warmup_steps": 5,
                                         "decay_steps": 25}},
                      25, 6, "dots_with_no_batch_dims_saveable", 3),
        case_lm_train(3, 10, 5, one, {"name": "momentum", "learning_rate": 0.05}, 15, 4,
                      "dots_saveable", 4),
        case_lm_train(4, 16, 7, small, {"name": "rmsprop", "learning_rate": 1e-3, "eps": 1e-3}, 12, 5,
                      "everything_saveable", 5),
    ]
    return [c for c in out if c is not None]
