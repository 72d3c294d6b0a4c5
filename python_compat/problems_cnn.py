"""Reference cases for convolutions and pooling (docs/refs-format.md, "Convolutions, pooling,
normalisation and batch statistics"; tests/refs/cnn.json).

Problems:

* ``conv``: ``nn.Conv(features, kernel_size, strides=..., padding=..., use_bias=...,
  feature_group_count=...)``, ``init(PRNGKey(seed), x)``, ``apply``. Expected
  ``{"params": {"kernel"[, "bias"]}, "y"}``.
* ``conv_grad``: as ``conv``; ``loss = sum(apply(params, x)**2)`` and ``jax.value_and_grad``
  w.r.t. the params collection and x. Expected ``{"loss", "grads": {"params": ..., "x"}}``.
* ``conv_transpose`` (flaxpp's own, docs/refs-problems.md): ``nn.ConvTranspose(features,
  kernel_size, strides=..., padding=..., kernel_dilation=..., use_bias=..., transpose_kernel=...)``
  initialised and applied, then ``loss = sum(y**2)`` and its gradients w.r.t. params and x.
* ``pool``: ``nn.max_pool`` / ``nn.avg_pool(x, window_shape, strides=..., padding=...)``.
* ``pool_grad``: ``jax.grad(lambda x: sum(pool(x)**2))(x)``.
* ``norm_grad``: ``nn.RMSNorm(epsilon=...)`` or ``nn.GroupNorm(num_groups=..., epsilon=...)``,
  ``init(PRNGKey(seed), x)``, ``y = apply``, ``loss = sum(y**3)`` and its gradients w.r.t. the
  params and x.
* ``batchnorm``: ``m = nn.BatchNorm(momentum=..., epsilon=...)``, ``v = m.init(PRNGKey(seed), x,
  use_running_average=False)``, ``y, upd = m.apply(v, x, use_running_average=False,
  mutable=["batch_stats"])``, then ``y_eval`` from the params and the updated statistics on
  ``x_eval`` with ``use_running_average=True``. Expected ``{"y", "batch_stats": {"mean",
  "var"}, "y_eval"}``.
* ``cnn_grad``: the contract's ``CNN(features, classes, policy)`` (no batch norm), the mean
  ``optax.softmax_cross_entropy_with_integer_labels`` of its logits, ``jax.value_and_grad``
  w.r.t. the params.
* ``cnn_train``: the CNN (batch norm optional) trained by an optax optimiser: variables from
  ``init(PRNGKey(seed), x[:batch_size])``; step i on rows ``(i*bs + j) mod N``, applied with
  ``train=True`` and ``mutable=["batch_stats"]`` (when used), the new statistics the loss's aux.
  Expected ``{"losses", "params"[, "batch_stats"]}``.
* ``saved_residuals`` with ``function: "conv_block_loss"``: JAX's list for
  ``checkpoint(lambda p, x: sum(ConvBlock(features).apply({"params": p}, x)**2), policy)``.

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
import optax
from jax._src.ad_checkpoint import saved_residuals as jax_saved_residuals

from flaxpp_refs import residual_records
from problems_nn_base import _np, _tag, draw_x, prng
from problems_random import shape_tag
from problems_remat import policy_from_spec, spec_tag, tolerance
from problems_train import batch_rows, tx_from_spec
from refs_writer import array, make_case

#: Human-readable notes about inputs JAX rejected (filled while generating).
SKIPPED: list[str] = []


def _flax_padding(padding: Any) -> Any:
    return padding if isinstance(padding, str) else tuple(tuple(p) for p in padding)


def _padding_tag(padding: Any) -> str:
    if isinstance(padding, str):
        return padding
    return "p" + "_".join(f"{lo}.{hi}" for lo, hi in padding)


def _circular(x: np.ndarray, kernel_size) -> np.ndarray:
    """Flax's CIRCULAR padding: each spatial axis wrapped by (k-1)//2 before and k//2 after."""
    pads = [(0, 0)] + [((k - 1) // 2, k // 2) for k in kernel_size] + [(0, 0)]
    return np.pad(x, pads, mode="wrap")


def _pads(padding: Any, in_shape, window, strides) -> list[tuple[int, int]]:
    return [tuple(p) for p in jax.lax.padtype_to_pads(in_shape, window, strides, padding)] \
        if isinstance(padding, str) else [tuple(p) for p in padding]


def _numpy_conv(x: np.ndarray, kernel: np.ndarray, bias, strides, padding, groups) -> np.ndarray:
    """A float64 direct NHWC/HWIO convolution with feature groups."""
    x = x.astype(np.float64)
    kernel = kernel.astype(np.float64)
    kh, kw, cg, f = kernel.shape
    if padding == "CIRCULAR":
        x, padding = _circular(x, (kh, kw)), "VALID"
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


def case_conv_transpose(seed, xshape, features, kernel_size, strides, padding, dilation,
                        use_bias, transpose_kernel, xs) -> dict:
    x = draw_x(xshape, xs)
    model = nn.ConvTranspose(features, tuple(kernel_size), strides=tuple(strides),
                             padding=_flax_padding(padding), kernel_dilation=tuple(dilation),
                             use_bias=use_bias, transpose_kernel=transpose_kernel)
    xj = jnp.asarray(x)
    params = model.init(prng(seed), xj)["params"]
    y = _np(model.apply({"params": params}, xj))
    # With transpose_kernel it is the gradient of a Conv with that kernel: checked for stride 1.
    if transpose_kernel and padding == "SAME" and tuple(strides) == (1, 1) and not use_bias:
        conv = nn.Conv(xshape[-1], tuple(kernel_size), padding="SAME",
                       kernel_dilation=tuple(dilation), use_bias=False)
        probe = jnp.zeros((*y.shape[:-1], xshape[-1]), jnp.float32)
        _, back = jax.vjp(lambda v: conv.apply({"params": params}, v), probe)
        want = _np(back(xj)[0])
        assert np.allclose(y, want, rtol=1e-5, atol=1e-5), "transpose_kernel is not Conv's VJP"

    def loss(p, v):
        return jnp.sum(model.apply({"params": p}, v) ** 2)

    value, (gp, gx) = jax.value_and_grad(loss, argnums=(0, 1))(params, xj)
    grads = {"params": {k: _np(v) for k, v in gp.items()}, "x": _np(gx)}
    tol = tolerance(max(int(np.prod(kernel_size)) * max(xshape[-1], features),
                        int(np.prod(xshape[:-1]))),
                    [y, _np(value), grads["x"], *grads["params"].values()])
    inputs = {"seed": seed, "x": array(x, "float32"), "features": features,
              "kernel_size": list(kernel_size), "strides": list(strides), "padding": padding,
              "kernel_dilation": list(dilation), "use_bias": use_bias,
              "transpose_kernel": transpose_kernel}
    expected = {"params": {k: array(_np(v), "float32") for k, v in params.items()},
                "y": array(y, "float32"), "loss": array(_np(value), "float32"),
                "grads": {"params": {k: array(v, "float32") for k, v in grads["params"].items()},
                          "x": array(grads["x"], "float32")}}
    case_id = (f"conv_transpose/seed{_tag(seed)}-x{shape_tag(xshape)}-f{features}"
               f"-k{shape_tag(kernel_size)}-s{shape_tag(strides)}-{_padding_tag(padding)}"
               f"-d{shape_tag(dilation)}{'' if use_bias else '-nobias'}"
               f"{'-tk' if transpose_kernel else ''}-xs{xs}")
    return make_case(case_id, "conv_transpose", inputs, expected, **tol)


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


def case_norm_grad(kind: str, seed, x: np.ndarray, epsilon: float, num_groups, xs) -> dict:
    model = (nn.RMSNorm(epsilon=epsilon) if kind == "rmsnorm"
             else nn.GroupNorm(num_groups=num_groups, epsilon=epsilon))
    xj = jnp.asarray(x)
    params = model.init(prng(seed), xj)["params"]
    y = _np(model.apply({"params": params}, xj))

    def loss(p, xv):
        return jnp.sum(model.apply({"params": p}, xv) ** 3)

    value, (gp, gx) = jax.value_and_grad(loss, argnums=(0, 1))(params, xj)
    grads = {"params": {k: _np(v) for k, v in gp.items()}, "x": _np(gx)}
    tol = tolerance(int(np.prod(x.shape)), [y, _np(value), grads["x"], *grads["params"].values()])
    inputs = {"kind": kind, "seed": seed, "x": array(x, "float32"), "epsilon": epsilon}
    if kind == "groupnorm":
        inputs["num_groups"] = num_groups
    expected = {"y": array(y, "float32"), "loss": array(_np(value), "float32"),
                "grads": {"params": {k: array(v, "float32") for k, v in grads["params"].items()},
                          "x": array(grads["x"], "float32")}}
    case_id = (f"norm_grad/{kind}-seed{_tag(seed)}-x{shape_tag(x.shape)}-eps{epsilon!r}"
               f"{'' if num_groups is None else f'-g{num_groups}'}-xs{xs}")
    return make_case(case_id, "norm_grad", inputs, expected, **tol)


def case_batchnorm(seed, xshape, momentum: float, epsilon: float, xs) -> dict:
    x = draw_x(xshape, xs, scale=1.5, offset=0.25)
    x_eval = draw_x(xshape, xs + 1, scale=1.5, offset=-0.5)
    m = nn.BatchNorm(momentum=momentum, epsilon=epsilon)
    v = m.init(prng(seed), jnp.asarray(x), use_running_average=False)
    y, upd = m.apply(v, jnp.asarray(x), use_running_average=False, mutable=["batch_stats"])
    stats = {k: _np(a) for k, a in upd["batch_stats"].items()}
    y_eval = m.apply({"params": v["params"], "batch_stats": upd["batch_stats"]},
                     jnp.asarray(x_eval), use_running_average=True)
    y, y_eval = _np(y), _np(y_eval)
    # The running statistics: momentum of the initial (0, 1) plus (1 - momentum) of the batch's.
    axes = tuple(range(x.ndim - 1))
    want_mean = (1 - momentum) * x.astype(np.float64).mean(axes)
    want_var = momentum + (1 - momentum) * x.astype(np.float64).var(axes)
    tol = tolerance(int(np.prod(xshape[:-1])), [y, y_eval, *stats.values()])
    for got, want in ((stats["mean"], want_mean), (stats["var"], want_var)):
        assert np.all(np.abs(got - want) <= (tol["atol"] + tol["rtol"] * np.abs(want)) / 2)
    inputs = {"seed": seed, "x": array(x, "float32"), "x_eval": array(x_eval, "float32"),
              "momentum": momentum, "epsilon": epsilon}
    expected = {"y": array(y, "float32"),
                "batch_stats": {k: array(a, "float32") for k, a in stats.items()},
                "y_eval": array(y_eval, "float32")}
    case_id = (f"batchnorm/seed{_tag(seed)}-x{shape_tag(xshape)}-m{momentum!r}-eps{epsilon!r}"
               f"-xs{xs}")
    return make_case(case_id, "batchnorm", inputs, expected, **tol)


class ConvBlock(nn.Module):
    """The contract's block (without batch norm here): Conv 3x3 SAME, relu, 2x2 average pool."""
    features: int
    use_batchnorm: bool = False

    @nn.compact
    def __call__(self, x, train=False):
        x = nn.Conv(self.features, (3, 3), padding="SAME")(x)
        if self.use_batchnorm:
            x = nn.BatchNorm(use_running_average=not train, momentum=0.9)(x)
        x = nn.relu(x)
        return nn.avg_pool(x, (2, 2), strides=(2, 2))


def lifted(policy: Any):
    if policy == "none":
        return ConvBlock
    return nn.remat(ConvBlock, policy=policy_from_spec(policy), prevent_cse=False,
                    static_argnums=(2,))


class CNN(nn.Module):
    features: tuple
    classes: int
    policy: Any = "none"
    use_batchnorm: bool = False

    @nn.compact
    def __call__(self, x, train=False):
        for f in self.features:
            x = lifted(self.policy)(f, self.use_batchnorm)(x, train)
        return nn.Dense(self.classes)(jnp.mean(x, axis=(1, 2)))


def case_cnn_grad(seed, xshape, features, classes, policy, xs) -> dict:
    x = draw_x(xshape, xs)
    labels = np.random.default_rng(xs).integers(0, classes, size=xshape[0]).astype(np.int32)
    model = CNN(tuple(features), classes, policy)
    xj = jnp.asarray(x)
    params = model.init(prng(seed), xj)["params"]
    prefix = "ConvBlock" if policy == "none" else "CheckpointConvBlock"
    assert sorted(params) == sorted([f"{prefix}_{i}" for i in range(len(features))] + ["Dense_0"])

    def loss(p):
        logits = model.apply({"params": p}, xj)
        return jnp.mean(optax.softmax_cross_entropy_with_integer_labels(logits, labels))

    value, grads = jax.value_and_grad(loss)(params)
    g = jax.tree_util.tree_map(_np, grads)
    leaves = [_np(value), *jax.tree_util.tree_leaves(g)]
    tol = tolerance(max(9 * max(xshape[-1], *features), int(np.prod(xshape[:-1]))), leaves)
    inputs = {"seed": seed, "x": array(x, "float32"), "labels": array(labels, "int32"),
              "features": list(features), "classes": classes, "policy": policy}
    expected = {"loss": array(_np(value), "float32"),
                "grads": {"params": jax.tree_util.tree_map(lambda v: array(v, "float32"), g)}}
    case_id = (f"cnn_grad/seed{_tag(seed)}-x{shape_tag(xshape)}-f{shape_tag(features)}"
               f"-c{classes}-{spec_tag(policy)}-xs{xs}")
    return make_case(case_id, "cnn_grad", inputs, expected, **tol)


def case_cnn_train(seed, xshape, features, classes, policy, use_bn, opt, steps, bs, xs) -> dict:
    x = draw_x(xshape, xs)
    y = np.random.default_rng(xs).integers(0, classes, size=xshape[0]).astype(np.int32)
    model = CNN(tuple(features), classes, policy, use_bn)
    variables = model.init(prng(seed), jnp.asarray(x[:bs]))
    params = variables["params"]
    stats = variables.get("batch_stats", {})
    assert bool(stats) == use_bn
    tx = tx_from_spec(opt)
    opt_state = tx.init(params)

    def loss_fn(p, st, xb, yb):
        if use_bn:
            logits, upd = model.apply({"params": p, "batch_stats": st}, xb, True,
                                      mutable=["batch_stats"])
            st = upd["batch_stats"]
        else:
            logits = model.apply({"params": p}, xb, True)
        return optax.softmax_cross_entropy_with_integer_labels(logits, yb).mean(), st

    @jax.jit
    def step(p, o, st, xb, yb):
        (loss, st), grads = jax.value_and_grad(loss_fn, has_aux=True)(p, st, xb, yb)
        updates, o = tx.update(grads, o, p)
        return optax.apply_updates(p, updates), o, st, loss

    losses = []
    for i in range(steps):
        rows = batch_rows(i, bs, xshape[0])
        params, opt_state, stats, loss = step(params, opt_state, stats, jnp.asarray(x[rows]),
                                              jnp.asarray(y[rows]))
        losses.append(_np(loss))
    losses = np.array(losses, np.float32)
    p_np = jax.tree_util.tree_map(_np, params)
    s_np = jax.tree_util.tree_map(_np, stats)
    leaves = [losses, *jax.tree_util.tree_leaves(p_np), *jax.tree_util.tree_leaves(s_np)]
    tol = tolerance(1000, leaves)  # a trajectory: the loose rule
    expected = {"losses": array(losses, "float32"),
                "params": jax.tree_util.tree_map(lambda v: array(v, "float32"), p_np)}
    if use_bn:
        expected["batch_stats"] = jax.tree_util.tree_map(lambda v: array(v, "float32"), s_np)
    inputs = {"seed": seed, "x": array(x, "float32"), "y": array(y, "int32"),
              "features": list(features), "classes": classes, "policy": policy,
              "use_batchnorm": use_bn, "optimizer": opt, "steps": steps, "batch_size": bs}
    case_id = (f"cnn_train/seed{_tag(seed)}-x{shape_tag(xshape)}-f{shape_tag(features)}"
               f"-c{classes}-{spec_tag(policy)}{'-bn' if use_bn else ''}-{opt['name']}"
               f"-s{steps}-bs{bs}-xs{xs}")
    return make_case(case_id, "cnn_train", inputs, expected, **tol)


def case_saved_residuals_conv_block(seed, xshape, features, policy, xs) -> dict:
    x = draw_x(xshape, xs)
    block = ConvBlock(features)
    xj = jnp.asarray(x)
    params = block.init(prng(seed), xj)["params"]
    h = jax.checkpoint(lambda p, v: jnp.sum(block.apply({"params": p}, v) ** 2),
                       policy=policy_from_spec(policy))
    expected = residual_records(jax_saved_residuals(h, params, xj))
    # The arguments (kernel, bias, x), and the convolution's output where the policy saves it.
    saves_conv = isinstance(policy, str) and policy in ("dots_saveable", "checkpoint_dots")
    assert len(expected) == 3 + saves_conv, expected
    inputs = {"function": "conv_block_loss", "policy": policy, "seed": seed,
              "x": array(x, "float32"), "features": features}
    case_id = (f"saved_residuals/conv_block_loss-{spec_tag(policy)}-seed{_tag(seed)}"
               f"-x{shape_tag(xshape)}-f{features}-xs{xs}")
    return make_case(case_id, "saved_residuals", inputs, expected, rtol=0, atol=0)


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
        (10, [2, 5, 6, 3], 4, [3, 2], [1, 1], "CIRCULAR", True, 1, 5008),
        (11, [1, 6, 6, 2], 3, [3, 3], [2, 2], "CIRCULAR", False, 1, 5009),
    ]
    for args in conv_grid:
        out.append(case_conv(*args))
    for args in conv_grid:
        out.append(case_conv_grad(*args))
    # A one-dimensional causal convolution (Flax's "CAUSAL": zeros before, one spatial axis).
    out.append(case_conv_grad(12, [2, 7, 3], 4, [3], [1], "CAUSAL", True, 1, 5010))
    # ---- conv_transpose: (seed, x shape, features, kernel, strides, padding, kernel dilation,
    # bias, transpose_kernel, x draw seed)
    for args in [
        (0, [2, 4, 4, 3], 5, [3, 3], [2, 2], "SAME", [1, 1], True, False, 5100),
        (1, [1, 5, 3, 2], 3, [3, 2], [1, 1], "VALID", [1, 1], True, False, 5101),
        (2, [2, 3, 4, 4], 2, [2, 3], [3, 2], "VALID", [1, 1], False, False, 5102),
        (3, [1, 4, 5, 2], 4, [3, 3], [2, 1], [[1, 2], [0, 1]], [1, 1], True, False, 5103),
        (4, [2, 4, 4, 3], 3, [3, 3], [1, 1], "SAME", [2, 1], False, True, 5104),
        (5, [1, 6, 5, 2], 4, [4, 4], [2, 2], "SAME", [1, 1], True, True, 5105),
    ]:
        out.append(case_conv_transpose(*args))
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
    # ---- norm_grad: (kind, seed, x shape, epsilon, num_groups, x draw seed)
    for kind, seed, xshape, eps, groups, xs in [
        ("rmsnorm", 0, [2, 5], 1e-6, None, 7000),
        ("rmsnorm", 1, [3, 4, 6], 1e-3, None, 7001),
        ("rmsnorm", 42, [2, 3, 3, 8], 1e-6, None, 7002),
        ("groupnorm", 0, [2, 4, 4, 6], 1e-6, 3, 7003),
        ("groupnorm", 1, [3, 8], 1e-5, 2, 7004),
        ("groupnorm", 7, [2, 3, 3, 4], 1e-6, 4, 7005),
        ("groupnorm", -1, [2, 5, 8], 1e-3, 1, 7006),
    ]:
        out.append(case_norm_grad(kind, seed, draw_x(xshape, xs, scale=2.0, offset=0.5), eps,
                                  groups, xs))
    # ---- batchnorm: (seed, x shape, momentum, epsilon, x draw seed (x_eval: the next))
    for seed, xshape, momentum, eps, xs in [
        (0, [8, 4], 0.9, 1e-5, 7100),
        (1, [4, 3, 3, 5], 0.99, 1e-5, 7102),
        (42, [2, 4, 4, 8], 0.5, 1e-3, 7104),
        (7, [16, 2], 0.0, 1e-6, 7106),
    ]:
        out.append(case_batchnorm(seed, xshape, momentum, eps, xs))
    # ---- cnn_grad: (seed, x shape, features, classes, policy, x draw seed)
    for seed, xshape, feats, classes, policy, xs in [
        (0, [4, 8, 8, 1], [4, 8], 10, "none", 8000),
        (1, [2, 8, 8, 3], [6], 5, "nothing_saveable", 8001),
        (42, [3, 16, 16, 2], [4, 4, 8], 7, "dots_saveable", 8002),
        (7, [2, 8, 8, 1], [8, 8], 3, "dots_with_no_batch_dims_saveable", 8003),
        (3, [4, 8, 8, 2], [5, 6], 4, "everything_saveable", 8004),
    ]:
        out.append(case_cnn_grad(seed, xshape, feats, classes, policy, xs))
    # ---- cnn_train: (seed, x shape, features, classes, policy, batch norm, optimizer, steps,
    # batch size, x draw seed). No adam with batch norm: the conv bias before a batch norm has a
    # zero gradient up to rounding, which adam scales to full steps, so its trajectory (and the
    # batch means) would follow the rounding noise of one implementation.
    for args in [
        (0, [12, 8, 8, 1], [4, 8], 4, "none", False,
         {"name": "sgd", "learning_rate": 0.1}, 6, 4, 8100),
        (1, [12, 8, 8, 1], [4, 8], 4, "none", True,
         {"name": "sgd", "learning_rate": 0.05}, 6, 4, 8101),
        (2, [10, 8, 8, 2], [6], 3, "nothing_saveable", True,
         {"name": "momentum", "learning_rate": 0.05}, 5, 4, 8102),
        (3, [8, 8, 8, 1], [4, 4], 5, "dots_saveable", True,
         {"name": "momentum", "learning_rate": 0.02}, 4, 8, 8103),
        (4, [12, 8, 8, 1], [4, 8], 4, "dots_with_no_batch_dims_saveable", False,
         {"name": "adam", "learning_rate": 0.01}, 6, 4, 8104),
    ]:
        out.append(case_cnn_train(*args))
    # ---- saved_residuals of conv_block_loss: (seed, x shape, features, policy, x draw seed)
    for seed, xshape, feats, policy, xs in [
        (0, [2, 6, 6, 3], 4, "nothing_saveable", 9000),
        (1, [2, 6, 6, 3], 4, "dots_saveable", 9001),
        (2, [1, 8, 8, 2], 5, "checkpoint_dots", 9002),
        (3, [2, 4, 4, 1], 3, "dots_with_no_batch_dims_saveable", 9003),
        (4, [2, 6, 6, 3], 4, {"name": "save_only_these_names", "names": ["a"]}, 9004),
    ]:
        out.append(case_saved_residuals_conv_block(seed, xshape, feats, policy, xs))
    return out
