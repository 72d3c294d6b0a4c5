"""Reference cases for the jnp/lax surface of docs/refs-problems.md (tests/refs/jnp.json).

Problems:

* ``array_op`` (flaxpp's own): one jax.numpy or jax.lax function of the table ``OPS`` applied
  to float32 operands ``x`` (and ``y``, ``z`` where it takes more) with the static arguments
  of the case's inputs. Expected ``{"value": f(operands)}``, and where the value is floating,
  the operands' cotangents ``jax.vjp(f, *operands)[1](ct)`` under their names, for the input
  ``ct`` (float32 of the value's shape).
* ``random.categorical`` (the contract's): ``jax.random.categorical(key, logits, axis[,
  shape])``, int32, exact.

Operands and cotangents are drawn with ``numpy.random.default_rng(seed)`` from N(0, 1) and
rounded to float32; some cases plant ties and NaNs where the function has rules for them.
"""

from __future__ import annotations

from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from problems_random import Key, kraw, kseed
from refs_writer import array, make_case

#: Human-readable notes about inputs JAX rejected (filled while generating).
SKIPPED: list[str] = []

EXACT = {"rtol": 0, "atol": 0}


def _index(x, ranges):
    return x[tuple(slice(*r) for r in ranges)]


def _clip(x, min=None, max=None):  # noqa: A002 (jnp.clip's own names)
    return jnp.clip(x, min, max)


#: op name -> (function of (operands, args), the operand names, tolerance rule). "exact":
#: the value and cotangents move or pick elements, or add at most two numbers; "sums": they
#: add many, in an order XLA chooses.
OPS: dict[str, tuple[Callable[..., Any], tuple[str, ...], str]] = {
    "lax.slice": (lambda x, a: lax.slice(x, a["start_indices"], a["limit_indices"],
                                         a.get("strides")), ("x",), "exact"),
    "jnp.index": (lambda x, a: _index(x, a["ranges"]), ("x",), "exact"),
    "lax.rev": (lambda x, a: lax.rev(x, a["dimensions"]), ("x",), "exact"),
    "lax.pad": (lambda x, y, a: lax.pad(x, y, [tuple(c) for c in a["padding_config"]]),
                ("x", "y"), "sums"),
    "jnp.pad": (lambda x, a: jnp.pad(x, [tuple(w) for w in a["pad_width"]],
                                     constant_values=a.get("value", 0.0)), ("x",), "exact"),
    "jnp.concatenate": (lambda *xs_a: jnp.concatenate(xs_a[:-1], axis=xs_a[-1]["axis"]),
                        ("x", "y", "z"), "exact"),
    "jnp.stack": (lambda *xs_a: jnp.stack(xs_a[:-1], axis=xs_a[-1]["axis"]), ("x", "y"), "exact"),
    "jnp.clip": (lambda x, a: _clip(x, a.get("min"), a.get("max")), ("x",), "exact"),
    "lax.cumsum": (lambda x, a: lax.cumsum(x, a["axis"], a.get("reverse", False)), ("x",), "sums"),
    "jnp.cumsum": (lambda x, a: jnp.cumsum(x, a.get("axis")), ("x",), "sums"),
    "jnp.argmax": (lambda x, a: jnp.argmax(x, a.get("axis"), keepdims=a.get("keepdims", False)),
                   ("x",), "exact"),
    "jnp.argmin": (lambda x, a: jnp.argmin(x, a.get("axis"), keepdims=a.get("keepdims", False)),
                   ("x",), "exact"),
    "jax.nn.one_hot": (lambda x, a: jax.nn.one_hot(x, a["num_classes"]), ("x",), "exact"),
    "lax.dynamic_slice": (lambda x, a: lax.dynamic_slice(x, a["start_indices"], a["slice_sizes"]),
                          ("x",), "exact"),
    "lax.dynamic_update_slice": (lambda x, y, a: lax.dynamic_update_slice(x, y,
                                                                          a["start_indices"]),
                                 ("x", "y"), "exact"),
    "jnp.sort": (lambda x, a: jnp.sort(x, a.get("axis", -1)), ("x",), "exact"),
    "jnp.argsort": (lambda x, a: jnp.argsort(x, axis=a.get("axis", -1),
                                             descending=a.get("descending", False)),
                    ("x",), "exact"),
    "lax.top_k": (lambda x, a: lax.top_k(x, a["k"])[0], ("x",), "exact"),
}

#: Further results of an op, each expected under its name beside "value" (no cotangent).
EXTRA: dict[str, dict[str, Callable[..., Any]]] = {
    "lax.top_k": {"indices": lambda x, a: lax.top_k(x, a["k"])[1]},
}


def _draw(shape, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def array_op(op: str, operands: dict[str, np.ndarray], args: dict, seed: int, label: str) -> dict:
    fn, names, rule = OPS[op]
    names = tuple(n for n in names if n in operands)
    values = [jnp.asarray(operands[n]) for n in names]
    value, vjp = jax.vjp(lambda *xs: fn(*xs, args), *values)
    inputs: dict = {"op": op}
    for n in names:
        inputs[n] = array(operands[n])
    inputs.update(args)
    expected: dict = {"value": array(np.asarray(value))}
    for name, extra in EXTRA.get(op, {}).items():
        expected[name] = array(np.asarray(extra(*values, args)))
    tol = EXACT
    if jnp.issubdtype(value.dtype, jnp.floating) and all(
            jnp.issubdtype(v.dtype, jnp.floating) for v in values):
        ct = _draw(value.shape, seed + 1000)
        inputs["ct"] = array(ct, "float32")
        for n, g in zip(names, vjp(jnp.asarray(ct))):
            expected[n] = array(np.asarray(g), "float32")
        if rule == "sums":
            scale = max([1.0] + [float(np.max(np.abs(np.asarray(e.value)), initial=0))
                                 for e in expected.values()])
            tol = {"rtol": 2e-6, "atol": 1e-6 * scale}
    return make_case(f"array_op/{op}/{label}", "array_op", inputs, expected, **tol)


def _with_ties_and_nans(x: np.ndarray) -> np.ndarray:
    y = x.copy().reshape(-1)
    y[1::5] = y[0::5][: len(y[1::5])]  # equal neighbours: the first index wins
    y[3::7] = np.nan                    # NaNs: the first one wins
    return y.reshape(x.shape)


def array_op_cases() -> list[dict]:
    out: list[dict] = []
    x34, x235 = _draw((3, 4), 1), _draw((2, 3, 5), 2)

    def add(op, operands, args, label, seed=0):
        out.append(array_op(op, operands, args, seed, label))

    add("lax.slice", {"x": x34}, {"start_indices": [1, 0], "limit_indices": [3, 4]}, "rows")
    add("lax.slice", {"x": x235}, {"start_indices": [0, 1, 1], "limit_indices": [2, 3, 5],
                                   "strides": [1, 1, 2]}, "strided")
    add("lax.slice", {"x": x235}, {"start_indices": [1, 0, 0], "limit_indices": [2, 3, 5],
                                   "strides": [2, 2, 3]}, "every-axis-strided")
    add("lax.slice", {"x": x34}, {"start_indices": [2, 1], "limit_indices": [2, 4]}, "empty")
    add("jnp.index", {"x": x34}, {"ranges": [[None, None, None], [None, -1, None]]}, "drop-last")
    add("jnp.index", {"x": x235}, {"ranges": [[-1, None, None], [1, 100, None], [None, None, 2]]},
        "negative-clamped-stepped")
    add("jnp.index", {"x": x34}, {"ranges": [[3, 1, None]]}, "empty")
    add("jnp.index", {"x": x235}, {"ranges": [[None, None, -1], [None, None, -2], [4, 0, -3]]},
        "negative-steps")
    add("jnp.index", {"x": x34}, {"ranges": [[-1, -10, -1], [10, -3, -1]]},
        "negative-steps-clamped")
    add("jnp.index", {"x": x34}, {"ranges": [[0, 3, -1]]}, "negative-step-empty")
    add("lax.rev", {"x": x235}, {"dimensions": [0, 2]}, "two-axes")
    add("lax.pad", {"x": x34, "y": np.float32(0.5)}, {"padding_config": [[1, 2, 0], [0, 1, 1]]},
        "grow-interior")
    add("lax.pad", {"x": x235, "y": np.float32(-1.0)},
        {"padding_config": [[-1, 1, 0], [2, -2, 1], [-1, -1, 2]]}, "negative-crops")
    add("lax.pad", {"x": _draw((4,), 3), "y": np.float32(2.0)}, {"padding_config": [[-2, -2, 0]]},
        "to-empty")
    add("jnp.pad", {"x": x34}, {"pad_width": [[1, 0], [2, 3]], "value": 1.5}, "constant")
    add("jnp.concatenate", {"x": x34, "y": _draw((3, 2), 4), "z": _draw((3, 1), 5)}, {"axis": 1},
        "three-axis1")
    add("jnp.concatenate", {"x": x235, "y": _draw((1, 3, 5), 6)}, {"axis": -3}, "negative-axis")
    add("jnp.stack", {"x": x34, "y": _draw((3, 4), 7)}, {"axis": 1}, "middle")
    add("jnp.stack", {"x": x34, "y": _draw((3, 4), 8)}, {"axis": -1}, "last")
    # clip's bounds meet elements exactly: JAX's max and min share the cotangent there.
    xc = x34.copy()
    xc[0, 0], xc[1, 1] = np.float32(0.25), np.float32(-0.5)
    add("jnp.clip", {"x": xc}, {"min": -0.5, "max": 0.25}, "both-ties")
    add("jnp.clip", {"x": x34}, {"max": 0.0}, "max-only")
    add("lax.cumsum", {"x": _draw((5, 64), 9)}, {"axis": 1}, "rows")
    add("lax.cumsum", {"x": x235}, {"axis": 1, "reverse": True}, "reverse-middle")
    add("jnp.cumsum", {"x": x34}, {}, "flattened")
    add("jnp.cumsum", {"x": _draw((100, 3), 10)}, {"axis": 0}, "long-axis0")
    xt = _with_ties_and_nans(_draw((6, 7), 11))
    for op in ("jnp.argmax", "jnp.argmin"):
        add(op, {"x": x235}, {"axis": 2}, "last")
        add(op, {"x": x235}, {"axis": 0, "keepdims": True}, "first-keepdims")
        add(op, {"x": x34}, {}, "flattened")
        add(op, {"x": xt}, {"axis": 1}, "ties-and-nans")
        add(op, {"x": np.round(x235 * 2)}, {"axis": 1}, "many-ties")
    add("lax.dynamic_slice", {"x": x235}, {"start_indices": [1, 0, 2], "slice_sizes": [1, 2, 3]},
        "inside")
    add("lax.dynamic_slice", {"x": x235}, {"start_indices": [5, -3, 4], "slice_sizes": [2, 2, 3]},
        "clamped")
    add("lax.dynamic_update_slice", {"x": x34, "y": _draw((2, 2), 12)}, {"start_indices": [1, 1]},
        "inside")
    add("lax.dynamic_update_slice", {"x": x235, "y": _draw((1, 3, 2), 13)},
        {"start_indices": [-1, 7, 9]}, "clamped")
    xs = _with_ties_and_nans(np.round(_draw((4, 9), 14) * 2))
    xs[0, :4] = np.array([0.0, -0.0, 0.0, -0.0], np.float32)
    for axis in (-1, 0):
        add("jnp.sort", {"x": xs}, {"axis": axis}, f"ties-nans-zeros-axis{axis}")
        add("jnp.argsort", {"x": xs}, {"axis": axis}, f"ties-nans-zeros-axis{axis}")
        add("jnp.argsort", {"x": xs}, {"axis": axis, "descending": True},
            f"descending-axis{axis}")
    add("jnp.sort", {"x": _draw((3, 50), 15)}, {}, "rows")
    add("lax.top_k", {"x": xs}, {"k": 5}, "ties-nans-zeros")
    add("lax.top_k", {"x": _draw((2, 3, 65), 16)}, {"k": 3}, "vocab")
    add("jax.nn.one_hot", {"x": np.array([[0, 3], [2, 7]], dtype=np.int32)}, {"num_classes": 4},
        "out-of-range-is-zeros")
    return out


def categorical_case(key: Key, logits: np.ndarray, label: str, axis: int | None = None,
                     shape: tuple | None = None) -> dict:
    kwargs: dict = {}
    inputs: dict = {"key": key.json(), "logits": array(logits, "float32")}
    if axis is not None:
        kwargs["axis"] = axis
        inputs["axis"] = axis
    if shape is not None:
        kwargs["shape"] = shape
        inputs["shape"] = list(shape)
    value = jax.random.categorical(key.jax(), jnp.asarray(logits), **kwargs)
    return make_case(f"random.categorical/{label}", "random.categorical", inputs,
                     array(np.asarray(value), "int32"), **EXACT)


def categorical_cases() -> list[dict]:
    logits = _draw((4, 10), 20) * 2
    vocab = _draw((3, 65), 21) * 3
    return [
        categorical_case(kseed(0), logits, "seed0-rows"),
        categorical_case(kseed(1), logits, "seed1-axis0", axis=0),
        categorical_case(kraw(0x12345678, 0x9abcdef0), vocab, "raw-vocab65"),
        categorical_case(kseed(2), logits, "seed2-shape-prefix", shape=(5, 4)),
        categorical_case(kseed(3), _draw((7,), 22), "seed3-vector"),
        categorical_case(kseed(4), np.log(np.full((2, 3), 1 / 3, np.float32)), "seed4-uniform",
                         shape=(100, 2)),
        categorical_case(kseed(5), _draw((2, 5, 3), 23), "seed5-middle-axis", axis=1),
    ]


def cases() -> list[dict]:
    return array_op_cases() + categorical_cases()
