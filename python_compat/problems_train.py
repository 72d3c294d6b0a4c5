"""Reference cases for the *training* problem ``train_mlp`` of docs/refs-format.md.

``train_mlp``: the linen ``MLP`` of ``mlp_init`` (``problems_nn.MLP``; wrapped in
``nn.remat(MLP, policy=P)`` unless the policy spec is ``"none"``), trained with optax on a
synthetic classification data set:

* ``params = M(features).init(PRNGKey(seed), x[:bs])["params"]``;
* ``tx = tx_from_spec(optimizer)`` (see below), ``opt_state = tx.init(params)``;
* step ``i`` (``i = 0 .. steps-1``) takes the rows ``(i*bs + j) mod N`` (``j = 0 .. bs-1``)
  of ``x`` and ``y`` and runs, under one ``jax.jit``::

      loss, grads = jax.value_and_grad(
          lambda p: optax.softmax_cross_entropy_with_integer_labels(
              M(features).apply({"params": p}, xb), yb).mean())(params)
      updates, opt_state = tx.update(grads, opt_state, params)
      params = optax.apply_updates(params, updates)

  ``losses[i]`` is that ``loss`` (the value *before* update ``i``);
* ``expected = {"losses": f32[steps], "params": {"Dense_i": {"kernel", "bias"}}}`` with the
  parameters after the last update.

Optimizer spec (``tx_from_spec``): ``name`` ``sgd`` -> ``optax.sgd(lr, **rest)`` (so
``momentum=None, nesterov=False`` unless given); ``momentum`` -> the same with ``momentum``
defaulting to 0.9; ``adam`` / ``adamw`` / ``rmsprop`` -> ``optax.<name>(lr, **rest)``;
``learning_rate`` is a number or a schedule object (``schedule_from_spec``);
``clip_by_global_norm: v`` -> ``optax.chain(optax.clip_by_global_norm(v), opt)``.

Data: Gaussian blobs per class from ``numpy.random.default_rng(dseed)`` (the ``ds<k>`` part
of the case id), written as float32 ``x`` / int32 ``y`` exactly as fed to JAX.

Robustness checks, run for every case (an AssertionError stops generation):

* *not chaotic*: the trajectory is re-run in JAX (a) twice from kernels perturbed by a
  random +-1 ulp, (b) with the loss computed as ``-mean(take_along_axis(log_softmax(z),
  y))`` (another, equivalent summation), and (c) entirely in NumPy float32 (OpenBLAS
  matmuls, the optax update rules re-implemented from the optax 0.2.8 source, schedules
  evaluated in float32 as in the traced jaxpr).  (a) and (b) must stay within
  ``CHAOS_LIMIT`` x the case tolerance of the reference, (c) within ``NUMPY_LIMIT`` x.  The
  NumPy re-implementation doubles as an executable statement of the optax semantics the
  C++ side implements.
* every case with ``clip_by_global_norm`` reports on how many steps clipping triggered
  (``g_norm >= max_norm``); the case list asserts the cases meant to clip really do.
"""

from __future__ import annotations

from typing import Any, Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax

from problems_nn import MLP, perturb_ulps
from problems_nn_base import _np, as_int, feats_tag, prng
from problems_remat import _round_up, names, policy_from_spec, spec_tag
from refs_writer import array, make_case

#: Human-readable notes about inputs JAX rejected (filled while generating).
SKIPPED: list[str] = []

#: Diagnostics: worst observed deviation / tolerance per check, and per-case notes.
STATS: dict[str, Any] = {}
NOTES: list[str] = []

#: A re-run of the trajectory in JAX (perturbed kernels, other loss formula) must stay
#: within this fraction of the case tolerance ("well within").
CHAOS_LIMIT = 0.25
#: The NumPy float32 re-implementation must stay within this fraction.
NUMPY_LIMIT = 0.5

RTOL = 1e-3

_SCHEDULES = {
    "constant": optax.constant_schedule,
    "linear": optax.linear_schedule,
    "cosine_decay": optax.cosine_decay_schedule,
    "warmup_cosine_decay": optax.warmup_cosine_decay_schedule,
}


# --------------------------------------------------------------------------- spec -> optax


def schedule_from_spec(lr: Any):
    """A number (returned as is) or ``{"name": <schedule>, **kwargs}`` -> optax schedule."""
    if isinstance(lr, (int, float)) and not isinstance(lr, bool):
        return lr
    if not isinstance(lr, dict) or lr.get("name") not in _SCHEDULES:
        raise ValueError(f"malformed learning_rate {lr!r}")
    rest = {k: v for k, v in lr.items() if k != "name"}
    return _SCHEDULES[lr["name"]](**rest)


def tx_from_spec(spec: dict) -> optax.GradientTransformation:
    """The optax optimiser of an ``optimizer`` object (docs/refs-format.md, train_mlp)."""
    rest = dict(spec)
    name = rest.pop("name")
    lr = schedule_from_spec(rest.pop("learning_rate"))
    clip = rest.pop("clip_by_global_norm", None)
    if name == "sgd":
        opt = optax.sgd(lr, **rest)
    elif name == "momentum":
        rest.setdefault("momentum", 0.9)
        opt = optax.sgd(lr, **rest)
    elif name in ("adam", "adamw", "rmsprop"):
        opt = getattr(optax, name)(lr, **rest)
    else:
        raise ValueError(f"unknown optimizer {name!r}")
    if clip is not None:
        opt = optax.chain(optax.clip_by_global_norm(clip), opt)
    return opt


# --------------------------------------------------------------------------- data


def make_data(N: int, D: int, C: int, dseed: int, *, sep: float = 2.0,
              scale: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """Gaussian blobs: class centres ~ N(0, sep^2 I_D); x = scale*(centre[y] + N(0, I_D)).

    Labels are ``arange(N) % C`` shuffled (every class present when N >= C)."""
    rng = np.random.default_rng(dseed)
    centres = rng.standard_normal((C, D)) * sep
    y = rng.permutation(np.arange(N) % C).astype(np.int32)
    x = ((centres[y] + rng.standard_normal((N, D))) * scale).astype(np.float32)
    return x, y


def batch_rows(i: int, bs: int, N: int) -> np.ndarray:
    return np.array([(i * bs + j) % N for j in range(bs)], dtype=np.int64)


# --------------------------------------------------------------------------- JAX trajectory


def _loss_optax(logits, yb):
    return optax.softmax_cross_entropy_with_integer_labels(logits, yb).mean()


def _loss_log_softmax(logits, yb):
    """The same loss through another, equivalent summation (check (b))."""
    lp = jax.nn.log_softmax(logits, axis=-1)
    picked = jnp.take_along_axis(lp, yb[:, None], axis=-1)[:, 0]
    return -jnp.sum(picked) / yb.shape[0]


def model_of(features: Sequence[int], policy: Any):
    cls = MLP if policy == "none" else nn.remat(MLP, policy=policy_from_spec(policy))
    return cls(tuple(features))


def jax_train(seed: Any, x: np.ndarray, y: np.ndarray, features: Sequence[int], opt: dict,
              steps: int, bs: int, policy: Any, *, loss_fn=_loss_optax,
              perturb_seed: int | None = None, with_norms: bool = False):
    """The train_mlp trajectory in JAX: (losses f32[steps], final params, grad norms|None)."""
    N = x.shape[0]
    model = model_of(features, policy)
    params = model.init(prng(seed), jnp.asarray(x[:bs]))["params"]
    if perturb_seed is not None:
        rng = np.random.default_rng(perturb_seed)
        params = {n: {"kernel": jnp.asarray(perturb_ulps(_np(sub["kernel"]), rng, 1)),
                      "bias": sub["bias"]} for n, sub in params.items()}
    tx = tx_from_spec(opt)
    opt_state = tx.init(params)

    def step(params, opt_state, xb, yb):
        loss, grads = jax.value_and_grad(
            lambda p: loss_fn(model.apply({"params": p}, xb), yb))(params)
        updates, opt_state = tx.update(grads, opt_state, params)
        params = optax.apply_updates(params, updates)
        if with_norms:
            return params, opt_state, loss, optax.tree.norm(grads)
        return params, opt_state, loss

    step = jax.jit(step)
    losses, norms = [], []
    for i in range(steps):
        rows = batch_rows(i, bs, N)
        out = step(params, opt_state, jnp.asarray(x[rows]), jnp.asarray(y[rows]))
        params, opt_state, loss = out[:3]
        losses.append(_np(loss))
        if with_norms:
            norms.append(float(_np(out[3])))
    losses = np.array(losses, dtype=np.float32)
    params = {n: {k: _np(v) for k, v in sub.items()} for n, sub in params.items()}
    return losses, params, (np.array(norms) if with_norms else None)


# --------------------------------------------------------------------------- NumPy float32
# An independent re-implementation of the trajectory (check (c)); it follows the optax
# 0.2.8 semantics written down in python_compat/GENERATION.md, in float32 throughout.

F32 = np.float32


def np_schedule(lr: Any):
    """count (int) -> float32 learning rate, as the traced optax schedule computes it."""
    if isinstance(lr, (int, float)):
        v = F32(lr)
        return lambda c: v
    name = lr["name"]
    a = {k: v for k, v in lr.items() if k != "name"}
    if name == "constant":
        v = F32(a["value"])
        return lambda c: v

    def poly(init, end, power, tsteps, tbegin):
        if tsteps <= 0:
            return lambda c: F32(init)
        tbegin = max(tbegin, 0)

        def s(c):
            k = min(max(c - tbegin, 0), tsteps)          # int32 clip
            frac = F32(1) - F32(k) / F32(tsteps)        # f32
            # (init - end) is a Python (double) difference, rounded to f32 once.
            return F32(F32(init - end) * F32(frac ** power) + F32(end))
        return s

    def cosine(init, dsteps, alpha=0.0, exponent=1.0):
        assert dsteps > 0

        def s(c):
            k = min(F32(c), F32(dsteps))
            cd = F32(0.5) * (F32(1) + F32(np.cos(F32(F32(np.pi) * k) / F32(dsteps))))
            dec = F32(F32(1 - alpha) * F32(cd ** F32(exponent)) + F32(alpha))
            return F32(F32(init) * dec)
        return s

    if name == "linear":
        return poly(a["init_value"], a["end_value"], 1, a["transition_steps"],
                    a.get("transition_begin", 0))
    if name == "cosine_decay":
        return cosine(a["init_value"], a["decay_steps"], a.get("alpha", 0.0),
                      a.get("exponent", 1.0))
    if name == "warmup_cosine_decay":
        init, peak, w, d = a["init_value"], a["peak_value"], a["warmup_steps"], a["decay_steps"]
        end, exponent = a.get("end_value", 0.0), a.get("exponent", 1.0)
        alpha = 0.0 if peak == 0.0 else end / peak
        s1 = poly(init, peak, 1, w, 0)
        s2 = cosine(peak, d - w, alpha, exponent)
        return lambda c: s1(c) if c < w else s2(c - w)
    raise ValueError(name)


def check_schedule(lr: Any, steps: int, case_id: str) -> float:
    """np_schedule(c) against optax's schedule, jitted on an int32 count, c = 0..steps.

    XLA folds and reassociates the schedule's constants (``count / T`` becomes
    ``count * f32(1/T)``, ``pi * count / T`` becomes ``count * f32(pi/T)``, ``0.5**2 *
    (1 - alpha)`` is folded, ...), so the two differ by a few ulps, and by more ulps -- but
    not more in absolute terms -- where ``1 + cos`` cancels near the end of a cosine decay.
    Returns ``max |optax - numpy| / max |optax|``; asserts it is at most 1e-6."""
    sched = schedule_from_spec(lr)
    if not callable(sched):
        return 0.0
    f = jax.jit(lambda c: jnp.asarray(sched(c), jnp.float32))
    got = np.array([_np(f(jnp.asarray(c, jnp.int32))) for c in range(steps + 1)], np.float64)
    want = np.array([np_schedule(lr)(int(c)) for c in range(steps + 1)], np.float64)
    err = float(np.max(np.abs(got - want)) / max(np.max(np.abs(got)), 1e-30))
    assert err <= 1e-6, f"{case_id}: NumPy schedule differs from optax by {err:.3g} (relative to peak)"
    return err


def _pow_f32(b: float, n: int) -> np.float32:
    """float32(b)**n correctly rounded (XLA's f32 pow(b, float(n)) matched this exactly)."""
    return F32(float(F32(b)) ** n)


class NpOptimizer:
    """optax's update rules for the specs of tx_from_spec, float32 NumPy arrays."""

    def __init__(self, spec: dict, params: dict):
        s = dict(spec)
        self.name = s.pop("name")
        self.lr = np_schedule(s.pop("learning_rate"))
        self.clip = s.pop("clip_by_global_norm", None)
        if self.name == "momentum":
            s.setdefault("momentum", 0.9)
        self.a = s
        self.count = 0  # int32 step counter of every stateful transform (first update: 0)
        z = lambda: {n: {k: np.zeros_like(v) for k, v in sub.items()} for n, sub in params.items()}
        self.t, self.mu, self.nu = z(), z(), z()
        if self.name == "rmsprop":
            init = F32(s.get("initial_scale", 0.0))
            self.nu = {n: {k: np.full_like(v, init) for k, v in sub.items()}
                       for n, sub in params.items()}

    def update(self, grads: dict, params: dict) -> dict:
        a, c = self.a, self.count
        lr = self.lr(c)
        leaves = [(n, k) for n in sorted(grads) for k in sorted(grads[n])]
        g = {nk: grads[nk[0]][nk[1]].astype(F32) for nk in leaves}
        if self.clip is not None:
            sq = F32(0)
            for nk in leaves:  # tree order: Dense_0/bias, Dense_0/kernel, Dense_1/bias, ...
                sq = F32(sq + np.sum(g[nk] * g[nk], dtype=F32))
            norm = F32(np.sqrt(sq))
            if not norm < F32(self.clip):
                g = {nk: (v / norm) * F32(self.clip) for nk, v in g.items()}
        out = {}
        for nk in leaves:
            gg, p = g[nk], params[nk[0]][nk[1]]
            n, k = nk
            if self.name in ("sgd", "momentum"):
                m = a.get("momentum")
                u = gg
                if m is not None:
                    t = gg + F32(m) * self.t[n][k]
                    u = gg + F32(m) * t if a.get("nesterov", False) else t
                    self.t[n][k] = t
                u = F32(-lr) * u
            elif self.name in ("adam", "adamw"):
                b1, b2 = a.get("b1", 0.9), a.get("b2", 0.999)
                eps, eps_root = F32(a.get("eps", 1e-8)), F32(a.get("eps_root", 0.0))
                mu = F32(1 - b1) * gg + F32(b1) * self.mu[n][k]
                nu = F32(1 - b2) * (gg * gg) + F32(b2) * self.nu[n][k]
                ci = c + 1
                bc1, bc2 = F32(1) - _pow_f32(b1, ci), F32(1) - _pow_f32(b2, ci)
                if a.get("nesterov", False):
                    bc1n = F32(1) - _pow_f32(b1, ci + 1)
                    mu_hat = F32(b1) * (mu / bc1n) + F32(1 - b1) * (gg / bc1)
                else:
                    mu_hat = mu / bc1
                nu_hat = nu / bc2
                u = mu_hat / (np.sqrt(nu_hat + eps_root) + eps)
                if self.name == "adamw":
                    u = u + F32(a.get("weight_decay", 1e-4)) * p
                u = F32(-lr) * u
                self.mu[n][k], self.nu[n][k] = mu, nu
            elif self.name == "rmsprop":
                d, eps = a.get("decay", 0.9), F32(a.get("eps", 1e-8))
                nu = F32(1 - d) * (gg * gg) + F32(d) * self.nu[n][k]
                mu = F32(1 - d) * gg + F32(d) * self.mu[n][k]
                if a.get("bias_correction", False):
                    bc = F32(1) - _pow_f32(d, c + 1)
                    nu_hat, mu_hat = nu / bc, mu / bc
                else:
                    nu_hat, mu_hat = nu, mu
                if a.get("centered", False):
                    den = nu_hat - mu_hat * mu_hat
                    self.mu[n][k] = mu
                else:
                    den = nu_hat
                if a.get("eps_in_sqrt", True):
                    scaling = F32(1) / np.sqrt(den + eps)
                else:
                    scaling = F32(1) / (np.sqrt(den) + eps)
                self.nu[n][k] = nu
                u = F32(-lr) * (scaling * gg)
                m = a.get("momentum")
                if m is not None:  # trace *after* the learning-rate scaling
                    t = u + F32(m) * self.t[n][k]
                    u = u + F32(m) * t if a.get("nesterov", False) else t
                    self.t[n][k] = t
            else:
                raise ValueError(self.name)
            out[nk] = u.astype(F32)
        self.count += 1
        new = {n: dict(sub) for n, sub in params.items()}
        for (n, k), u in out.items():
            new[n][k] = (params[n][k] + u).astype(F32)
        return new


def np_loss_grads(params: dict, xb: np.ndarray, yb: np.ndarray):
    """Mean softmax cross-entropy of the MLP and its gradients, float32 NumPy."""
    L = len(params)
    acts, zs = [xb], []
    a = xb
    for i in range(L):
        k, b = params[f"Dense_{i}"]["kernel"], params[f"Dense_{i}"]["bias"]
        z = (a @ k + b).astype(F32)
        zs.append(z)
        a = np.maximum(z, F32(0)) if i != L - 1 else z
        if i != L - 1:
            acts.append(a)
    logits = zs[-1]
    m = np.max(logits, axis=1, keepdims=True)
    e = np.exp(logits - m)
    s = np.sum(e, axis=1, keepdims=True, dtype=F32)
    lse = (np.log(s) + m)[:, 0]
    bs = xb.shape[0]
    per = lse - logits[np.arange(bs), yb]
    loss = F32(np.cumsum(per, dtype=F32)[-1] / F32(bs))
    g = (e / s).astype(F32)
    g[np.arange(bs), yb] -= F32(1)
    g = (g / F32(bs)).astype(F32)
    grads = {}
    for i in range(L - 1, -1, -1):
        grads[f"Dense_{i}"] = {"kernel": (acts[i].T @ g).astype(F32),
                               "bias": np.sum(g, axis=0, dtype=F32)}
        if i:
            g = ((g @ params[f"Dense_{i}"]["kernel"].T) * (zs[i - 1] > 0)).astype(F32)
    return loss, grads


def np_train(params0: dict, x, y, opt: dict, steps: int, bs: int):
    params = {n: {k: v.copy() for k, v in sub.items()} for n, sub in params0.items()}
    tx = NpOptimizer(opt, params)
    losses = []
    N = x.shape[0]
    for i in range(steps):
        rows = batch_rows(i, bs, N)
        loss, grads = np_loss_grads(params, x[rows], y[rows])
        losses.append(loss)
        params = tx.update(grads, params)
    return np.array(losses, dtype=F32), params


# --------------------------------------------------------------------------- comparison


def tolerance(losses: np.ndarray, params: dict) -> dict:
    m = max([1.0, float(np.max(np.abs(losses)))]
            + [float(np.max(np.abs(v))) for sub in params.values() for v in sub.values()])
    return {"rtol": RTOL, "atol": _round_up(1e-5 * m)}


def ratio(got_losses, got_params, want_losses, want_params, tol) -> float:
    """max over all elements of |got - want| / (atol + rtol |want|)."""
    pairs = [(got_losses, want_losses)] + [
        (got_params[n][k], want_params[n][k]) for n in want_params for k in want_params[n]]
    worst = 0.0
    for g, w in pairs:
        g64, w64 = np.asarray(g, np.float64), np.asarray(w, np.float64)
        assert g64.shape == w64.shape
        assert np.all(np.isfinite(g64)) and np.all(np.isfinite(w64))
        err = np.abs(g64 - w64) / (tol["atol"] + tol["rtol"] * np.abs(w64))
        worst = max(worst, float(np.max(err)) if err.size else 0.0)
    return worst


def _note_stat(key: str, value: float, case_id: str) -> None:
    if value > STATS.get(key, (0.0, ""))[0]:
        STATS[key] = (value, case_id)


# --------------------------------------------------------------------------- cases


def _lr_tag(lr: Any) -> str:
    if isinstance(lr, (int, float)):
        return f"lr{lr!r}"
    return lr["name"]


def opt_tag(opt: dict) -> str:
    parts = [opt["name"], _lr_tag(opt["learning_rate"])]
    for k, v in opt.items():
        if k in ("name", "learning_rate", "clip_by_global_norm"):
            continue
        parts.append(f"{k}{('true' if v else 'false') if isinstance(v, bool) else repr(v)}")
    if "clip_by_global_norm" in opt:
        parts.append(f"clip{opt['clip_by_global_norm']!r}")
    return "_".join(parts)


def case_train_mlp(seed: Any, N: int, D: int, features: Sequence[int], opt: dict,
                   steps: int, bs: int, policy: Any, dseed: int, *, sep: float = 2.0,
                   scale: float = 1.0, clip_expect: str | None = None) -> dict | None:
    """One train_mlp case.  ``clip_expect``: "some" (clipping triggers on some steps, not
    all), "all" (on every step), or None (not checked)."""
    feats = [as_int(h) for h in features]
    C = feats[-1]
    assert 1 <= bs <= N and 50 <= steps <= 200, (bs, N, steps)
    x, y = make_data(N, D, C, dseed, sep=sep, scale=scale)
    case_id = (f"train_mlp/{opt_tag(opt)}-{spec_tag(policy)}-seed{seed}-N{N}-D{D}"
               f"-f{feats_tag(features)}-bs{bs}-T{steps}-ds{dseed}")
    try:
        losses, params, _ = jax_train(seed, x, y, feats, opt, steps, bs, policy)
    except Exception as e:  # JAX/optax rejects this input
        SKIPPED.append(f"{case_id}: {type(e).__name__}: {e}")
        return None
    assert losses.dtype == np.float32 and losses.shape == (steps,)
    tol = tolerance(losses, params)

    # Init params are those of the unwrapped MLP (asserted in problems_nn for mlp_grad).
    params0 = {n: {k: _np(v) for k, v in sub.items()} for n, sub in
               MLP(tuple(feats)).init(prng(seed), jnp.asarray(x[:bs]))["params"].items()}

    # (a) +-1 ulp perturbed kernels, twice; (b) the log_softmax loss; also gradient norms.
    r_pert = 0.0
    for ps in (1, 2):
        l2, p2, _ = jax_train(seed, x, y, feats, opt, steps, bs, policy, perturb_seed=1000 * ps + dseed)
        r_pert = max(r_pert, ratio(l2, p2, losses, params, tol))
    l3, p3, norms = jax_train(seed, x, y, feats, opt, steps, bs, policy,
                              loss_fn=_loss_log_softmax, with_norms=True)
    r_lsm = ratio(l3, p3, losses, params, tol)
    # (c) NumPy float32 re-implementation (its schedule checked against optax's first).
    _note_stat("schedule", check_schedule(opt["learning_rate"], steps, case_id), case_id)
    l4, p4 = np_train(params0, x, y, opt, steps, bs)
    r_np = ratio(l4, p4, losses, params, tol)
    _note_stat("perturbed_ulp", r_pert, case_id)
    _note_stat("log_softmax", r_lsm, case_id)
    _note_stat("numpy", r_np, case_id)
    assert r_pert <= CHAOS_LIMIT, f"{case_id}: 1-ulp perturbation drifts {r_pert:.3g} x tol"
    assert r_lsm <= CHAOS_LIMIT, f"{case_id}: log_softmax loss drifts {r_lsm:.3g} x tol"
    assert r_np <= NUMPY_LIMIT, f"{case_id}: NumPy float32 differs {r_np:.3g} x tol"

    clip_info = ""
    if "clip_by_global_norm" in opt:
        v = float(opt["clip_by_global_norm"])
        clipped = int(np.sum(norms >= v))
        margin = float(np.min(np.abs(norms - v)) / v)
        clip_info = (f", clip {v}: triggered on {clipped}/{steps} steps, grad norm "
                     f"{norms.min():.3g}..{norms.max():.3g}, closest rel. distance to the "
                     f"threshold {margin:.2g}")
        if clip_expect == "some":
            assert 0 < clipped < steps, f"{case_id}: clipping triggered on {clipped}/{steps}"
        elif clip_expect == "all":
            assert clipped == steps, f"{case_id}: clipping triggered on {clipped}/{steps}"
    NOTES.append(f"{case_id}: loss {losses[0]:.4g} -> {losses[-1]:.4g}, tol rtol {tol['rtol']} "
                 f"atol {tol['atol']}, drift/tol: ulp {r_pert:.2g}, log_softmax {r_lsm:.2g}, "
                 f"numpy {r_np:.2g}{clip_info}")

    inputs = {"seed": seed, "x": array(x, "float32"), "y": array(y, "int32"),
              "features": list(features), "optimizer": opt, "steps": steps,
              "batch_size": bs, "policy": policy}
    expected = {"losses": array(losses, "float32"),
                "params": {n: {k: array(v, "float32") for k, v in sub.items()}
                           for n, sub in params.items()}}
    return make_case(case_id, "train_mlp", inputs, expected, **tol)


def cases() -> list[dict]:
    """All train_mlp cases (train.json)."""
    SKIPPED.clear()
    STATS.clear()
    NOTES.clear()
    only_a = names("save_only_these_names", "a")
    lin = {"name": "linear", "init_value": 0.2, "end_value": 0.02, "transition_steps": 80,
           "transition_begin": 10}
    out: list[dict | None] = [
        # ---- sgd
        case_train_mlp(0, 64, 4, [16, 3], {"name": "sgd", "learning_rate": 0.1},
                       100, 16, "none", 1),
        case_train_mlp(-3, 50, 6, [16, 8, 4], {"name": "sgd", "learning_rate": lin,
                                               "clip_by_global_norm": 0.5},
                       120, 12, "nothing_saveable", 2, clip_expect="some"),
        case_train_mlp(7, 40, 3, [12, 12, 12, 2],
                       {"name": "sgd", "learning_rate": {
                           "name": "warmup_cosine_decay", "init_value": 0.0, "peak_value": 0.3,
                           "warmup_steps": 15, "decay_steps": 120, "end_value": 0.01}},
                       150, 40, "dots_saveable", 3),
        # ---- momentum
        case_train_mlp(1, 96, 8, [32, 4], {"name": "momentum", "learning_rate": 0.02},
                       100, 32, "dots_saveable", 4),
        case_train_mlp(-1, 70, 5, [24, 16, 5],
                       {"name": "momentum", "learning_rate": {
                           "name": "cosine_decay", "init_value": 0.05, "decay_steps": 100,
                           "alpha": 0.1}, "momentum": 0.8, "nesterov": True},
                       130, 20, "dots_with_no_batch_dims_saveable", 5),
        case_train_mlp(11, 33, 2, [8, 2],
                       {"name": "momentum", "learning_rate": {"name": "constant", "value": 0.05},
                        "clip_by_global_norm": 0.3},
                       80, 10, only_a, 6, clip_expect="some"),
        # ---- adam
        case_train_mlp(2, 256, 64, [32, 32, 16, 10], {"name": "adam", "learning_rate": 0.001},
                       60, 64, "none", 7, sep=0.5),
        case_train_mlp(-2**31, 100, 10, [20, 6],
                       {"name": "adam", "learning_rate": {
                           "name": "warmup_cosine_decay", "init_value": 0.0, "peak_value": 0.01,
                           "warmup_steps": 20, "decay_steps": 150, "end_value": 0.0001},
                        "b1": 0.8, "b2": 0.99, "eps": 1e-6},
                       180, 24, only_a, 8),
        case_train_mlp(5, 48, 7, [16, 16, 3],
                       {"name": "adam", "learning_rate": {"name": "constant", "value": 0.003},
                        "clip_by_global_norm": 0.4},
                       90, 16, "nothing_saveable", 9, clip_expect="some"),
        case_train_mlp(9, 60, 12, [24, 4],
                       {"name": "adam", "learning_rate": {
                           "name": "linear", "init_value": 0.005, "end_value": 0.0005,
                           "transition_steps": 60}, "nesterov": True},
                       75, 25, "dots_with_no_batch_dims_saveable", 10),
        # ---- adamw
        case_train_mlp(3, 80, 16, [32, 5], {"name": "adamw", "learning_rate": 0.003},
                       100, 16, "dots_saveable", 11),
        case_train_mlp(-7, 90, 9, [16, 16, 16, 6],
                       {"name": "adamw", "learning_rate": {
                           "name": "cosine_decay", "init_value": 0.004, "decay_steps": 80},
                        "weight_decay": 0.05},
                       110, 30, "nothing_saveable", 12),
        case_train_mlp(13, 64, 6, [20, 3],
                       {"name": "adamw", "learning_rate": lin | {"init_value": 0.01,
                                                                "end_value": 0.001},
                        "weight_decay": 0.3, "b2": 0.95, "clip_by_global_norm": 2.0},
                       70, 64, "none", 13, scale=3.0, clip_expect="some"),
        # ---- rmsprop
        case_train_mlp(4, 120, 20, [32, 8], {"name": "rmsprop", "learning_rate": 0.001},
                       100, 40, "none", 14),
        case_train_mlp(-5, 72, 8, [24, 24, 4],
                       {"name": "rmsprop", "learning_rate": {
                           "name": "cosine_decay", "init_value": 0.001, "decay_steps": 150,
                           "alpha": 0.05, "exponent": 2.0}, "centered": True},
                       150, 18, "dots_with_no_batch_dims_saveable", 15),
        case_train_mlp(6, 55, 5, [16, 3],
                       {"name": "rmsprop", "learning_rate": 0.0005, "momentum": 0.9,
                        "clip_by_global_norm": 0.25},
                       100, 20, only_a, 16, clip_expect="some"),
        case_train_mlp(8, 30, 4, [10, 10, 2],
                       {"name": "rmsprop", "learning_rate": {"name": "constant", "value": 0.002},
                        "decay": 0.95, "centered": True, "momentum": 0.5, "nesterov": True,
                        "eps": 1e-6},
                       60, 7, "dots_saveable", 17),
        case_train_mlp(12, 100, 3, [16, 5],
                       {"name": "rmsprop", "learning_rate": {
                           "name": "warmup_cosine_decay", "init_value": 0.0001,
                           "peak_value": 0.003, "warmup_steps": 10, "decay_steps": 90},
                        "eps_in_sqrt": False, "bias_correction": True, "initial_scale": 0.1},
                       100, 32, "nothing_saveable", 18),
        # ---- extra: sgd with an explicit momentum key; full-batch.
        case_train_mlp(2**31 + 5, 24, 2, [8, 2],
                       {"name": "sgd", "learning_rate": 0.05, "momentum": 0.5},
                       50, 24, "none", 19),
    ]
    return [c for c in out if c is not None]


if __name__ == "__main__":
    # Diagnostics: JAX_PLATFORMS=cpu python_compat/.venv/bin/python python_compat/problems_train.py
    # prints, per case, the loss trajectory's ends, the tolerance, the observed drift of every
    # robustness re-run (as a fraction of the tolerance) and how often clipping triggered.
    import os
    assert os.environ.get("JAX_PLATFORMS") == "cpu", "run with JAX_PLATFORMS=cpu"
    jax.config.update("jax_enable_x64", False)
    print(f"{len(cases())} cases")
    for note in NOTES:
        print(note)
    for key, (value, case_id) in STATS.items():
        print(f"worst {key}: {value:.3g} ({case_id})")
