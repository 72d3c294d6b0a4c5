"""Reference cases for the *remat* problems of docs/refs-format.md.

Problems: ``checkpoint_dot_policy``, ``checkpoint_dot_policy_grad``,
``named_dot_policy_grad`` and ``saved_residuals`` (the ``checkpoint_dot_policy`` and
``named_dot_policy`` functions; ``mlp_loss`` belongs to the module family).

Every expected value is produced by calling exactly the JAX expression named in the
registry, eagerly (no ``jax.jit``), on exactly the float32 inputs written to the case:

* ``checkpoint_dot_policy``: ``jax.checkpoint(f, policy=dots_with_no_batch_dims_saveable)``
* ``checkpoint_dot_policy_grad``: ``jax.grad(jax.checkpoint(f, policy=P), argnums=(0,1,2))``
  (``jax.grad(f, argnums=(0,1,2))`` for the spec ``"none"``; no ``policy`` input = the
  registry default ``dots_with_no_batch_dims_saveable``)
* ``named_dot_policy_grad``: the same for ``g`` (the function with ``checkpoint_name``s)
* ``saved_residuals``: ``jax._src.ad_checkpoint.saved_residuals(jax.checkpoint(f or g,
  policy=P), w1, w2, x)``, encoded as a JSON list of ``{"dtype", "shape", "kind"}``
  (see python_compat/GENERATION.md, "Remat problems").

Policy specs are turned into JAX policy objects by :func:`policy_from_spec` only.

Inputs: ``w1``, ``w2`` ~ N(0, 1)/sqrt(d) and ``x`` ~ N(0, 1) drawn with
``numpy.random.default_rng(seed)`` and rounded to float32 (the written values are
exactly the values JAX is fed).  Some cases zero rows of ``x`` or columns of ``w1`` so
that relu's argument is exactly 0 (its gradient there is 0 in JAX); "dyadic" cases use
small dyadic rationals (integers for ``x``, multiples of 1/4 for the weights) so every
product and partial sum of the first two matmuls is exact in float32 in any summation
order (many exact zeros in relu's argument, and short decimal strings for the one
300x300 case).

Robustness guards (the C++ side uses another BLAS): every relu argument is either
exactly 0 by construction/exact arithmetic or far from 0 relative to its float32
rounding error (otherwise the draw is rejected and the seed bumped, the case id then
names the seed actually used); and every float case is re-computed with NumPy float32
(OpenBLAS sgemm, hand-written backward pass, sequential float32 summation for the
loss), which must agree with JAX within half of the case's tolerance.
"""

from __future__ import annotations

import math
import re
from typing import Any, Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax._src.ad_checkpoint import saved_residuals as jax_saved_residuals
from jax.ad_checkpoint import checkpoint_name

from flaxpp_refs import residual_kind, residual_records  # noqa: F401 (re-exported)
from refs_writer import array, make_case

#: Human-readable notes about inputs JAX rejected (filled while generating).
SKIPPED: list[str] = []

#: Largest observed |JAX - NumPy-float32| / tolerance over all float cases (diagnostics).
STATS: dict[str, float] = {"max_err_over_tol": 0.0}

#: The no-argument policy names of the "Policy spec" bullet.
NOARG_POLICIES = [
    "everything_saveable",
    "nothing_saveable",
    "dots_saveable",
    "checkpoint_dots",
    "dots_with_no_batch_dims_saveable",
    "checkpoint_dots_with_no_batch_dims",
]
DEFAULT_POLICY = "dots_with_no_batch_dims_saveable"

_NAME_POLICIES = {"save_only_these_names", "save_any_names_but_these",
                  "save_anything_except_these_names"}
_KWARG_POLICIES = {"save_and_offload_only_these_names", "offload_dot_with_no_batch_dims"}


# --------------------------------------------------------------------------- policies


def policy_from_spec(spec: Any):
    """The JAX policy object of a refs policy spec (``"none"`` is handled by the caller).

    * a string names a policy without arguments: ``getattr(jax.checkpoint_policies, name)``;
    * ``{"name": <name policy>, "names": [...]}``: that function called with the names
      (``save_only_these_names``, ``save_any_names_but_these`` and
      ``save_anything_except_these_names`` take them as ``*names``);
    * ``{"name": "save_and_offload_only_these_names" | "offload_dot_with_no_batch_dims",
      ...}``: the function called with the spec's other keys as keyword arguments;
    * ``{"name": "save_from_both_policies", "policies": [spec, spec]}``: the function called
      with the two sub-policies.
    """
    cp = jax.checkpoint_policies
    if isinstance(spec, str):
        if spec not in NOARG_POLICIES:
            raise ValueError(f"not a no-argument policy name: {spec!r}")
        return getattr(cp, spec)
    if not isinstance(spec, dict) or not isinstance(spec.get("name"), str):
        raise ValueError(f"malformed policy spec {spec!r}")
    name = spec["name"]
    rest = {k: v for k, v in spec.items() if k != "name"}
    if name in _NAME_POLICIES:
        if set(rest) != {"names"}:
            raise ValueError(f"{name} takes exactly the key 'names', got {sorted(rest)}")
        return getattr(cp, name)(*rest["names"])
    if name in _KWARG_POLICIES:
        return getattr(cp, name)(**rest)
    if name == "save_from_both_policies":
        if set(rest) != {"policies"} or len(rest["policies"]) != 2:
            raise ValueError(f"{name} takes 'policies': [spec, spec], got {rest!r}")
        p1, p2 = (policy_from_spec(s) for s in rest["policies"])
        return cp.save_from_both_policies(p1, p2)
    raise ValueError(f"unknown policy name {name!r}")


def spec_tag(spec: Any) -> str:
    """A compact, unique label of a policy spec for case ids."""
    if spec is None:
        return "default"
    if isinstance(spec, str):
        return spec
    name = spec["name"]
    if name in _NAME_POLICIES:
        return f"{name}[{','.join(spec['names'])}]"
    if name == "save_and_offload_only_these_names":
        return (f"{name}[save={','.join(spec['names_which_can_be_saved'])};"
                f"offload={','.join(spec['names_which_can_be_offloaded'])};"
                f"{spec['offload_src']}->{spec['offload_dst']}]")
    if name == "offload_dot_with_no_batch_dims":
        return f"{name}[{spec['offload_src']}->{spec['offload_dst']}]"
    if name == "save_from_both_policies":
        return f"{name}({'+'.join(spec_tag(s) for s in spec['policies'])})"
    raise ValueError(spec)


def names(name: str, *ns: str) -> dict:
    return {"name": name, "names": list(ns)}


def offload_names(saved: Sequence[str], offloaded: Sequence[str]) -> dict:
    return {"name": "save_and_offload_only_these_names",
            "names_which_can_be_saved": list(saved),
            "names_which_can_be_offloaded": list(offloaded),
            "offload_src": "device", "offload_dst": "pinned_host"}


OFFLOAD_DOTS = {"name": "offload_dot_with_no_batch_dims",
                "offload_src": "device", "offload_dst": "pinned_host"}


def both(a: Any, b: Any) -> dict:
    return {"name": "save_from_both_policies", "policies": [a, b]}


# --------------------------------------------------------------------------- functions


def f(w1, w2, x):
    return jnp.sum((jax.nn.relu(x @ w1) @ w2) ** 2)


def g(w1, w2, x):
    return jnp.sum(checkpoint_name(checkpoint_name(jax.nn.relu(checkpoint_name(x @ w1, "a")), "b") @ w2, "c") ** 2)


FUNCTIONS: dict[str, Callable] = {"checkpoint_dot_policy": f, "named_dot_policy": g}


def checkpointed(fun: Callable, spec: Any) -> Callable:
    """``fun`` under one ``jax.checkpoint`` with the spec's policy (``"none"``: ``fun``)."""
    if spec == "none":
        return fun
    return jax.checkpoint(fun, policy=policy_from_spec(DEFAULT_POLICY if spec is None else spec))


# --------------------------------------------------------------------------- inputs


class Inputs:
    """float32 ``w1`` [d,d], ``w2`` [d,d], ``x`` [N,d] plus a label for case ids."""

    def __init__(self, label: str, w1: np.ndarray, w2: np.ndarray, x: np.ndarray):
        for a in (w1, w2, x):
            assert a.dtype == np.float32 and a.ndim == 2
        d = w1.shape[0]
        assert w1.shape == (d, d) and w2.shape == (d, d) and x.shape[1] == d
        self.label, self.w1, self.w2, self.x = label, w1, w2, x
        self.N, self.d = x.shape

    def json(self) -> dict:
        return {"w1": array(self.w1, "float32"), "w2": array(self.w2, "float32"),
                "x": array(self.x, "float32")}

    def jax(self):
        return tuple(jnp.asarray(a) for a in (self.w1, self.w2, self.x))


def _relu_args_safe(w1: np.ndarray, x: np.ndarray) -> bool:
    """True when every relu argument is exactly 0 or clearly away from 0.

    A nonzero pre-activation must exceed d * eps32 * sum_k |x_k w_k| (a bound on its
    float32 rounding error in any summation order), times 4 for margin; otherwise another
    BLAS could give it the other sign and flip relu's gradient mask.  Exact zeros must be
    exact in float64 too (zero rows/columns or exact dyadic arithmetic)."""
    x64, w64 = x.astype(np.float64), w1.astype(np.float64)
    h = x64 @ w64
    bound = np.abs(x64) @ np.abs(w64) * (w1.shape[0] * float(np.finfo(np.float32).eps) * 4)
    h32 = x @ w1
    ok_zero = (h == 0) & (h32 == 0)
    ok_far = np.abs(h) > bound
    return bool(np.all(ok_zero | ok_far))


def draw(N: int, d: int, seed: int, *, zero_rows: Sequence[int] = (),
         zero_cols: Sequence[int] = ()) -> Inputs:
    """Normal inputs (weights scaled by 1/sqrt(d)); rejected draws bump the seed."""
    for s in range(seed, seed + 1000):
        rng = np.random.default_rng(s)
        w1 = (rng.standard_normal((d, d)) / math.sqrt(d)).astype(np.float32)
        w2 = (rng.standard_normal((d, d)) / math.sqrt(d)).astype(np.float32)
        x = rng.standard_normal((N, d)).astype(np.float32)
        x[list(zero_rows), :] = 0.0
        w1[:, list(zero_cols)] = 0.0
        if _relu_args_safe(w1, x):
            tag = f"N{N}-d{d}-seed{s}"
            if zero_rows:
                tag += "-zrows" + "_".join(map(str, zero_rows))
            if zero_cols:
                tag += "-zcols" + "_".join(map(str, zero_cols))
            return Inputs(tag, w1, w2, x)
    raise RuntimeError(f"no safe draw for N={N} d={d} seed={seed}")


def draw_dyadic(N: int, d: int, seed: int) -> Inputs:
    """x integer in [-2, 2], weights k/4 with k in [-4, 4]: x @ w1 exact in float32."""
    rng = np.random.default_rng(seed)
    w1 = (rng.integers(-4, 5, size=(d, d)) / 4).astype(np.float32)
    w2 = (rng.integers(-4, 5, size=(d, d)) / 4).astype(np.float32)
    x = rng.integers(-2, 3, size=(N, d)).astype(np.float32)
    assert _relu_args_safe(w1, x)
    return Inputs(f"N{N}-d{d}-seed{seed}-dyadic", w1, w2, x)


# --------------------------------------------------------------------------- checks


def _np(v) -> np.ndarray:
    return np.asarray(jax.device_get(v))


def _round_up(v: float, digits: int = 2) -> float:
    """``v`` rounded *up* to ``digits`` significant digits (a tidy, never tighter, tolerance)."""
    if v <= 0:
        return 0.0
    e = math.floor(math.log10(v)) - (digits - 1)
    r = float(f"{math.ceil(v / 10.0**e - 1e-9)}e{e}")
    return r if r >= v else float(f"{math.ceil(v / 10.0**e)}e{e}")


# Tolerance rule (the C++ side uses another BLAS: OpenBLAS sgemm with float32 accumulation
# and another summation order):
#   d <= 32: rtol 2e-5, atol 1e-6 * max(1, max|expected|)
#   d  > 32: rtol 1e-4, atol 1e-5 * max(1, max|expected|)
# where max|expected| is taken over every leaf of the case's expected value.
def tolerance(d: int, expected: Sequence[np.ndarray]) -> dict:
    m = max(1.0, max(float(np.max(np.abs(e))) if e.size else 0.0 for e in expected))
    if d <= 32:
        return {"rtol": 2e-5, "atol": _round_up(1e-6 * m)}
    return {"rtol": 1e-4, "atol": _round_up(1e-5 * m)}


def numpy_reference(inp: Inputs):
    """f and its gradients in NumPy float32 (OpenBLAS), loss summed sequentially."""
    w1, w2, x = inp.w1, inp.w2, inp.x
    h = x @ w1
    r = np.maximum(h, np.float32(0))
    y = r @ w2
    loss = np.cumsum((y * y).reshape(-1), dtype=np.float32)[-1] if y.size else np.float32(0)
    gy = np.float32(2) * y
    gw2 = r.T @ gy
    gh = (gy @ w2.T) * (h > 0)
    gw1 = x.T @ gh
    gx = gh @ w1.T
    return np.float32(loss), {"w1": gw1, "w2": gw2, "x": gx}


def _check_close(label: str, got: np.ndarray, want: np.ndarray, tol: dict) -> None:
    assert got.shape == want.shape, (label, got.shape, want.shape)
    err = np.abs(got.astype(np.float64) - want.astype(np.float64))
    allowed = tol["atol"] + tol["rtol"] * np.abs(want.astype(np.float64))
    ratio = float(np.max(err / allowed)) if err.size else 0.0
    STATS["max_err_over_tol"] = max(STATS["max_err_over_tol"], ratio)
    if ratio > 0.5:
        raise AssertionError(f"{label}: NumPy float32 differs from JAX by {ratio:.3g} x tolerance")


# --------------------------------------------------------------------------- problems


def case_checkpoint_dot_policy(inp: Inputs) -> dict:
    out = _np(jax.checkpoint(f, policy=jax.checkpoint_policies.dots_with_no_batch_dims_saveable)(*inp.jax()))
    assert out.dtype == np.float32 and out.shape == ()
    tol = tolerance(inp.d, [out])
    case_id = f"checkpoint_dot_policy/{inp.label}"
    ref, _ = numpy_reference(inp)
    _check_close(case_id, np.asarray(ref), out, tol)
    return make_case(case_id, "checkpoint_dot_policy", inp.json(), array(out, "float32"), **tol)


def _grad_case(problem: str, fun: Callable, inp: Inputs, spec: Any) -> dict | None:
    case_id = f"{problem}/{spec_tag(spec)}-{inp.label}"
    try:
        grads = jax.grad(checkpointed(fun, spec), argnums=(0, 1, 2))(*inp.jax())
        grads = [_np(v) for v in grads]
    except Exception as e:  # JAX rejects this policy
        SKIPPED.append(f"{case_id}: {type(e).__name__}: {e}")
        return None
    for v, a in zip(grads, (inp.w1, inp.w2, inp.x)):
        assert v.dtype == np.float32 and v.shape == a.shape
    tol = tolerance(inp.d, grads)
    _, ref = numpy_reference(inp)
    for k, v in zip(("w1", "w2", "x"), grads):
        _check_close(f"{case_id} {k}", ref[k], v, tol)
    inputs = inp.json()
    if spec is not None:
        inputs["policy"] = spec
    expected = {k: array(v, "float32") for k, v in zip(("w1", "w2", "x"), grads)}
    return make_case(case_id, problem, inputs, expected, **tol)


def case_checkpoint_dot_policy_grad(inp: Inputs, spec: Any = None) -> dict | None:
    return _grad_case("checkpoint_dot_policy_grad", f, inp, spec)


def case_named_dot_policy_grad(inp: Inputs, spec: Any) -> dict | None:
    assert spec is not None and spec != "none", "named_dot_policy_grad: policy is required"
    return _grad_case("named_dot_policy_grad", g, inp, spec)


#: Every (description, kind) pair seen, for the generator's report.
RESIDUAL_DESCRIPTIONS: dict[str, str] = {}


def case_saved_residuals(function: str, inp: Inputs, spec: Any) -> dict | None:
    assert spec != "none" and spec is not None
    case_id = f"saved_residuals/{function}-{spec_tag(spec)}-{inp.label}"
    try:
        res = jax_saved_residuals(checkpointed(FUNCTIONS[function], spec), *inp.jax())
    except Exception as e:
        SKIPPED.append(f"{case_id}: {type(e).__name__}: {e}")
        return None
    expected = []
    for aval, desc in res:
        kind = residual_kind(desc)
        RESIDUAL_DESCRIPTIONS.setdefault(re.sub(r" from /.*$", " from <loc>", desc), kind)
        expected.append({"dtype": np.dtype(aval.dtype).name, "shape": [int(s) for s in aval.shape],
                         "kind": kind})
    # saved_residuals lists each residual variable once (it walks a set of variables);
    # two identical descriptions would mean JAX reported one value twice.
    descs = [d for _, d in res]
    assert len(set(descs)) == len(descs), (case_id, descs)
    inputs = {"function": function, "policy": spec, **inp.json()}
    return make_case(case_id, "saved_residuals", inputs, expected, rtol=0, atol=0)


# --------------------------------------------------------------------------- case lists

# (N, d) shapes: mostly small and odd.
SMALL_SHAPES = [(1, 1), (2, 3), (3, 5), (5, 4), (7, 7), (16, 8), (33, 17), (4, 1), (1, 6),
                (9, 2), (12, 31), (20, 32), (6, 11), (3, 3)]

NAMED_GRAD_SPECS: list[Any] = [
    *NOARG_POLICIES,
    names("save_only_these_names"),
    names("save_only_these_names", "a"),
    names("save_only_these_names", "b"),
    names("save_only_these_names", "c"),
    names("save_only_these_names", "a", "c"),
    names("save_only_these_names", "a", "b", "c"),
    names("save_any_names_but_these"),
    names("save_any_names_but_these", "b"),
    names("save_any_names_but_these", "a", "b", "c"),
    names("save_anything_except_these_names", "a"),
    names("save_anything_except_these_names", "b", "c"),
    offload_names(["a"], ["c"]),
    offload_names([], ["a", "b", "c"]),
    offload_names(["b"], []),
    OFFLOAD_DOTS,
    both("dots_saveable", names("save_only_these_names", "b")),
    both(names("save_only_these_names", "a"), names("save_any_names_but_these", "a", "b")),
    both("nothing_saveable", "dots_with_no_batch_dims_saveable"),
]

RESIDUAL_DOT_SPECS: list[Any] = [
    "nothing_saveable", "dots_saveable", "checkpoint_dots",
    "dots_with_no_batch_dims_saveable", "checkpoint_dots_with_no_batch_dims",
]
RESIDUAL_NAME_SPECS: list[Any] = [
    names("save_only_these_names"),
    names("save_only_these_names", "a"),
    names("save_only_these_names", "b"),
    names("save_only_these_names", "c"),
    names("save_only_these_names", "a", "b"),
    names("save_only_these_names", "a", "c"),
    names("save_only_these_names", "b", "c"),
    names("save_only_these_names", "a", "b", "c"),
    names("save_only_these_names", "zz"),
    names("save_any_names_but_these"),
    names("save_any_names_but_these", "a"),
    names("save_any_names_but_these", "b"),
    names("save_any_names_but_these", "c"),
    names("save_any_names_but_these", "a", "c"),
    names("save_any_names_but_these", "a", "b", "c"),
]


def cases() -> list[dict]:
    """All remat cases (remat.json)."""
    SKIPPED.clear()
    STATS["max_err_over_tol"] = 0.0
    RESIDUAL_DESCRIPTIONS.clear()
    out: list[dict | None] = []

    # ---- checkpoint_dot_policy: the forward value.
    for i, (N, d) in enumerate(SMALL_SHAPES[:10]):
        out.append(case_checkpoint_dot_policy(draw(N, d, 100 + i)))
    out.append(case_checkpoint_dot_policy(draw(6, 5, 120, zero_rows=[0, 3])))
    out.append(case_checkpoint_dot_policy(draw_dyadic(7, 6, 121)))
    out.append(case_checkpoint_dot_policy(draw(128, 64, 122)))
    out.append(case_checkpoint_dot_policy(draw_dyadic(300, 300, 123)))

    # ---- checkpoint_dot_policy_grad: every no-argument policy, "none" and the default,
    # each on several shapes, plus exact-zero probes, a few object specs and one large case.
    grad_specs: list[Any] = [None, "none", *NOARG_POLICIES]
    seed = 200
    for j, spec in enumerate(grad_specs):
        for k in range(3):
            N, d = SMALL_SHAPES[(3 * j + k) % len(SMALL_SHAPES)]
            out.append(case_checkpoint_dot_policy_grad(draw(N, d, seed), spec))
            seed += 1
    for spec in (None, "none", "nothing_saveable", "dots_saveable"):
        out.append(case_checkpoint_dot_policy_grad(draw(5, 4, 240, zero_rows=[1, 4]), spec))
        out.append(case_checkpoint_dot_policy_grad(draw(3, 6, 241, zero_cols=[0, 2]), spec))
        out.append(case_checkpoint_dot_policy_grad(draw_dyadic(7, 5, 242), spec))
    for spec in (names("save_only_these_names", "a"), names("save_any_names_but_these"),
                 both("dots_saveable", "nothing_saveable"), OFFLOAD_DOTS):
        out.append(case_checkpoint_dot_policy_grad(draw(7, 7, 250), spec))
    out.append(case_checkpoint_dot_policy_grad(draw(128, 64, 260), None))
    out.append(case_checkpoint_dot_policy_grad(draw(300, 8, 261), "nothing_saveable"))

    # ---- named_dot_policy_grad: every spec form, two shapes each, zero probes, one large.
    seed = 300
    for j, spec in enumerate(NAMED_GRAD_SPECS):
        for k in range(2):
            N, d = SMALL_SHAPES[(2 * j + k + 1) % len(SMALL_SHAPES)]
            out.append(case_named_dot_policy_grad(draw(N, d, seed), spec))
            seed += 1
    for spec in ("nothing_saveable", names("save_only_these_names", "a", "c"),
                 names("save_any_names_but_these", "c"), offload_names(["a"], ["b"])):
        out.append(case_named_dot_policy_grad(draw(4, 3, 360, zero_rows=[2]), spec))
        out.append(case_named_dot_policy_grad(draw_dyadic(6, 5, 361), spec))
    out.append(case_named_dot_policy_grad(draw(96, 48, 370), names("save_only_these_names", "b")))

    # ---- saved_residuals: shape-only results, small inputs.
    shapes = [(5, 4), (3, 7), (1, 1), (8, 2)]
    seed = 400
    for j, spec in enumerate(RESIDUAL_DOT_SPECS + RESIDUAL_NAME_SPECS):
        for k in range(2):
            N, d = shapes[(j + k) % len(shapes)]
            out.append(case_saved_residuals("named_dot_policy", draw(N, d, seed), spec))
            seed += 1
    for j, spec in enumerate(RESIDUAL_DOT_SPECS + [names("save_only_these_names", "a"),
                                                  names("save_any_names_but_these")]):
        for k in range(2):
            N, d = shapes[(j + k + 1) % len(shapes)]
            out.append(case_saved_residuals("checkpoint_dot_policy", draw(N, d, seed), spec))
            seed += 1
    out.append(case_saved_residuals("checkpoint_dot_policy", draw(64, 32, 480), "dots_saveable"))
    out.append(case_saved_residuals("named_dot_policy", draw(64, 32, 481),
                                    names("save_only_these_names", "b", "c")))

    return [c for c in out if c is not None]


# --------------------------------------------------------------------------- raw output


def print_raw_residuals() -> None:
    """Print JAX's own ``print_saved_residuals`` lines for a few N=5, d=4 examples.

    Run: ``JAX_PLATFORMS=cpu python_compat/.venv/bin/python python_compat/problems_remat.py``.
    (The ``<file>:<line>:<col>`` parts point at ``f``/``g`` in this file.)"""
    from jax.ad_checkpoint import print_saved_residuals

    inp = draw(5, 4, 1)
    for function, spec in [("checkpoint_dot_policy", "nothing_saveable"),
                           ("checkpoint_dot_policy", "dots_saveable"),
                           ("checkpoint_dot_policy", "dots_with_no_batch_dims_saveable"),
                           ("named_dot_policy", names("save_only_these_names", "a", "c"))]:
        print(f"--- {function}, policy {spec_tag(spec)}, N=5 d=4")
        print_saved_residuals(checkpointed(FUNCTIONS[function], spec), *inp.jax())


if __name__ == "__main__":
    print_raw_residuals()
