"""Reference cases for the *random* problems of docs/refs-format.md.

Problems: ``random.key``, ``random.split``, ``random.fold_in``, ``random.bits``,
``random.uniform``, ``random.normal``, ``random.truncated_normal``, ``initializer``, and
``random.randint`` (docs/refs-problems.md).

``cases()`` is the full set (run with JAX's default ``jax_threefry_partitionable=True``);
``legacy_cases()`` is a smaller set meant to be generated with the flag set to False.
The threefry mode is set by the caller (gen_refs.py) before these functions run; the
functions themselves use whatever mode is active.

Every expected value is produced by calling the JAX function named in the registry,
with exactly the inputs written to the case (keys are passed as raw key data wrapped
with ``jax.random.wrap_key_data``).
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from refs_writer import array, make_case

# Tolerances (see refs-format.md "Tolerances"): integer and uniform-based results are
# exact; normal-family results may differ by a few float32 ulps across math libraries.
EXACT = {"rtol": 0, "atol": 0}
NORMALISH = {"rtol": 0, "atol": 0, "ulp": 4}

#: Human-readable notes about inputs JAX rejected (filled while generating).
SKIPPED: list[str] = []


# --------------------------------------------------------------------------- helpers


class Key:
    """Raw threefry key data (uint32[2]) plus a label used in case ids."""

    def __init__(self, label: str, data: Sequence[int]):
        self.label = label
        self.data = np.asarray(data, dtype=np.uint32)
        assert self.data.shape == (2,)

    def jax(self):
        return jax.random.wrap_key_data(jnp.asarray(self.data, dtype=jnp.uint32))

    def json(self):
        return array(self.data, "uint32")


def kseed(seed: int) -> Key:
    """The key ``jax.random.key(seed)``, labelled ``seed<seed>``."""
    data = np.asarray(jax.random.key_data(jax.random.key(seed)))
    return Key(f"seed{seed}", data)


def kraw(k0: int, k1: int) -> Key:
    """A key given by its raw words, labelled ``raw<k0hex>-<k1hex>``."""
    return Key(f"raw{k0:08x}-{k1:08x}", [k0, k1])


def shape_tag(shape: Sequence[int]) -> str:
    return "scalar" if len(shape) == 0 else "x".join(str(int(d)) for d in shape)


def num_tag(v: Any) -> str:
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return f"{v:g}"
    if isinstance(v, (list, tuple)):
        return "_".join(num_tag(x) for x in v)
    return str(v)


def _np(x) -> np.ndarray:
    return np.asarray(jax.device_get(x))


def _check(out: np.ndarray, dtype, shape: Sequence[int]) -> np.ndarray:
    assert out.dtype == dtype, (out.dtype, dtype)
    assert tuple(out.shape) == tuple(shape), (out.shape, shape)
    return out


# --------------------------------------------------------------------------- problems


def case_key(seed: int):
    try:
        out = _np(jax.random.key_data(jax.random.key(seed)))
    except (OverflowError, ValueError, TypeError) as e:  # JAX rejects this seed
        SKIPPED.append(f"random.key seed={seed}: {type(e).__name__}: {e}")
        return None
    _check(out, np.uint32, (2,))
    return make_case(f"random.key/seed{seed}", "random.key", {"seed": seed}, array(out, "uint32"), **EXACT)


def case_split(key: Key, num: int | None = None):
    inputs: dict = {"key": key.json()}
    if num is None:
        out = jax.random.split(key.jax())
        n, tag = 2, "default"
    else:
        inputs["num"] = num
        out = jax.random.split(key.jax(), num)
        n, tag = num, f"num{num}"
    out = _check(_np(jax.random.key_data(out)), np.uint32, (n, 2))
    return make_case(f"random.split/{key.label}-{tag}", "random.split", inputs, array(out, "uint32"), **EXACT)


def case_fold_in(key: Key, data: int):
    assert 0 <= data < 2**32
    out = _check(_np(jax.random.key_data(jax.random.fold_in(key.jax(), data))), np.uint32, (2,))
    return make_case(
        f"random.fold_in/{key.label}-data{data}",
        "random.fold_in",
        {"key": key.json(), "data": data},
        array(out, "uint32"),
        **EXACT,
    )


def case_bits(key: Key, shape: Sequence[int]):
    shape = list(shape)
    out = _check(_np(jax.random.bits(key.jax(), tuple(shape))), np.uint32, shape)
    return make_case(
        f"random.bits/{key.label}-{shape_tag(shape)}",
        "random.bits",
        {"key": key.json(), "shape": shape},
        array(out, "uint32"),
        **EXACT,
    )


def case_randint(key: Key, shape: Sequence[int], minval: int, maxval: int, dtype: str | None = None):
    """``jax.random.randint(key, shape, minval, maxval[, dtype])``; ``dtype`` int32 (JAX's
    default with x64 off) or uint32, written only when given."""
    shape = list(shape)
    inputs: dict = {"key": key.json(), "shape": shape, "minval": minval, "maxval": maxval}
    kwargs = {}
    if dtype is not None:
        inputs["dtype"] = dtype
        kwargs["dtype"] = getattr(jnp, dtype)
    try:
        out = _np(jax.random.randint(key.jax(), tuple(shape), minval, maxval, **kwargs))
    except OverflowError as e:  # a bound beyond int32 (x64 off)
        SKIPPED.append(f"random.randint minval={minval} maxval={maxval}: {type(e).__name__}: {e}")
        return None
    out = _check(out, np.dtype(dtype or "int32"), shape)
    tag = f"{num_tag(minval)}_{num_tag(maxval)}" + (f"-{dtype}" if dtype else "")
    return make_case(
        f"random.randint/{key.label}-{shape_tag(shape)}-{tag}",
        "random.randint",
        inputs,
        array(out, dtype or "int32"),
        **EXACT,
    )


def case_uniform(key: Key, shape: Sequence[int], minval: float | None = None, maxval: float | None = None):
    shape = list(shape)
    inputs: dict = {"key": key.json(), "shape": shape}
    kwargs: dict = {}
    tag = ""
    if minval is not None:
        inputs["minval"] = minval
        kwargs["minval"] = minval
        tag += f"-min{num_tag(minval)}"
    if maxval is not None:
        inputs["maxval"] = maxval
        kwargs["maxval"] = maxval
        tag += f"-max{num_tag(maxval)}"
    if not tag:
        tag = "-default"
    out = _check(_np(jax.random.uniform(key.jax(), tuple(shape), **kwargs)), np.float32, shape)
    assert np.all(np.isfinite(out)), "uniform produced non-finite values"
    return make_case(
        f"random.uniform/{key.label}-{shape_tag(shape)}{tag}",
        "random.uniform",
        inputs,
        array(out, "float32"),
        **EXACT,
    )


def case_normal(key: Key, shape: Sequence[int]):
    shape = list(shape)
    out = _check(_np(jax.random.normal(key.jax(), tuple(shape))), np.float32, shape)
    return make_case(
        f"random.normal/{key.label}-{shape_tag(shape)}",
        "random.normal",
        {"key": key.json(), "shape": shape},
        array(out, "float32"),
        **NORMALISH,
    )


def case_truncated_normal(key: Key, lower: float, upper: float, shape: Sequence[int]):
    shape = list(shape)
    out = _check(
        _np(jax.random.truncated_normal(key.jax(), lower, upper, tuple(shape))), np.float32, shape
    )
    assert np.all(out > np.float32(lower)) and np.all(out < np.float32(upper))
    return make_case(
        f"random.truncated_normal/{key.label}-lo{num_tag(lower)}-hi{num_tag(upper)}-{shape_tag(shape)}",
        "random.truncated_normal",
        {"key": key.json(), "lower": lower, "upper": upper, "shape": shape},
        array(out, "float32"),
        **NORMALISH,
    )


_UNIFORM_INITS = {"zeros", "ones", "constant", "uniform", "lecun_uniform", "glorot_uniform",
                  "xavier_uniform", "he_uniform", "kaiming_uniform"}
_NORMAL_INITS = {"normal", "truncated_normal", "lecun_normal", "glorot_normal", "xavier_normal",
                 "he_normal", "kaiming_normal"}
INITIALIZER_NAMES = sorted(_UNIFORM_INITS | _NORMAL_INITS | {"variance_scaling"})

_ARG_ABBREV = {"value": "v", "stddev": "std", "scale": "s", "lower": "lo", "upper": "hi",
               "in_axis": "in", "out_axis": "out", "batch_axis": "batch"}


def _init_tolerance(name: str, args: dict) -> dict:
    if name in _UNIFORM_INITS:
        return EXACT
    if name in _NORMAL_INITS:
        return NORMALISH
    assert name == "variance_scaling"
    return EXACT if args["distribution"] == "uniform" else NORMALISH


def case_init(name: str, key: Key, shape: Sequence[int], args: dict | None = None):
    """``initializer`` problem; ``args=None`` omits the ``args`` field (default ``{}``)."""
    shape = list(shape)
    init = getattr(jax.nn.initializers, name)
    if name in ("zeros", "ones"):
        assert not args
        out = init(key.jax(), tuple(shape))
    else:
        out = init(**(args or {}))(key.jax(), tuple(shape))
    out = _check(_np(out), np.float32, shape)
    assert np.all(np.isfinite(out))
    if args is None:
        argtag = "-noargs"
    else:
        parts = []
        for k, v in args.items():
            if k in ("mode", "distribution"):
                parts.append(str(v))
            else:
                parts.append(f"{_ARG_ABBREV.get(k, k)}{num_tag(v)}")
        argtag = "".join("-" + p for p in parts)
    inputs: dict = {"name": name, "key": key.json(), "shape": shape}
    if args is not None:
        inputs["args"] = dict(args)
    return make_case(
        f"initializer/{name}{argtag}-{shape_tag(shape)}-{key.label}",
        "initializer",
        inputs,
        array(out, "float32"),
        **_init_tolerance(name, args or {}),
    )


# --------------------------------------------------------------------------- case sets

KEY_SEEDS = [
    0, 1, 42, 1701, 123456789, -1, -3,
    2**31 - 1, 2**31, 2**31 + 99, 2**32 - 1, 2**32 + 5,
    -2**31, -2**31 - 100, 10**12, -10**12,
    2**63 - 1, -2**63,
    2**63, -2**63 - 1, 2**64,  # expected to be rejected (do not fit int64)
]


def _variance_scaling_modes() -> list[str]:
    """Every mode this JAX accepts (fan_geo_avg only exists in newer versions)."""
    modes = ["fan_in", "fan_out", "fan_avg"]
    try:
        jax.nn.initializers.variance_scaling(1.0, "fan_geo_avg", "normal")(jax.random.key(0), (2, 3))
        modes.append("fan_geo_avg")
    except ValueError as e:
        SKIPPED.append(f"initializer variance_scaling mode=fan_geo_avg: ValueError: {e}")
    return modes


def cases() -> list[dict]:
    """The full random.json set (partitionable mode)."""
    SKIPPED.clear()
    out: list = []
    add = out.append

    s0, s1, s42, s1701 = kseed(0), kseed(1), kseed(42), kseed(1701)
    sm1 = kseed(-1)
    big = kseed(2**32 + 5)
    tera = kseed(10**12)
    negbig = kseed(-2**31 - 100)
    u31 = kseed(2**31 + 99)
    rawF = kraw(0xFFFFFFFF, 0xFFFFFFFF)
    rawR = kraw(0x13198A2E, 0x03707344)

    # random.key
    for seed in KEY_SEEDS:
        c = case_key(seed)
        if c is not None:
            add(c)

    # random.split
    for num in (1, 2, 3, 4, 7, 1000, None):
        add(case_split(s0, num))
    for num in (2, 3, 7, None):
        add(case_split(s42, num))
    add(case_split(sm1, 4))
    add(case_split(sm1, None))
    add(case_split(rawF, 5))
    add(case_split(rawR, 3))
    add(case_split(big, 2))
    add(case_split(tera, 3))
    add(case_split(negbig, 16))
    add(case_split(s1701, 9))
    add(case_split(u31, 1))

    # random.fold_in
    for data in (0, 1, 4, 2**31, 2**32 - 1, 123456789):
        add(case_fold_in(s0, data))
    add(case_fold_in(s42, 7))
    add(case_fold_in(s42, 2**31 + 1))
    add(case_fold_in(sm1, 1))
    add(case_fold_in(rawF, 2**32 - 1))
    add(case_fold_in(rawF, 0))
    add(case_fold_in(rawR, 0x243F6A88))
    add(case_fold_in(tera, 99))
    add(case_fold_in(negbig, 65536))

    # random.bits
    add(case_bits(s0, [3]))
    add(case_bits(s1701, [3]))
    add(case_bits(s0, []))
    add(case_bits(s42, [1]))
    add(case_bits(s42, [7]))
    add(case_bits(sm1, [2, 3]))
    add(case_bits(rawF, [3, 1, 5]))
    add(case_bits(s0, [0]))
    add(case_bits(s42, [65537]))  # > 2**16 elements
    add(case_bits(big, [5, 7]))
    add(case_bits(negbig, [1, 1, 1]))
    add(case_bits(rawR, [4, 4]))
    add(case_bits(s1, [11]))
    add(case_bits(tera, [2, 0, 3]))

    # random.uniform
    add(case_uniform(s0, [3]))
    add(case_uniform(s42, [6]))
    add(case_uniform(s42, [3, 3], -5.0, 5.0))
    add(case_uniform(s0, []))
    add(case_uniform(s1, [], -1.0, 1.0))
    add(case_uniform(s0, [257, 257], -1.0, 1.0))  # > 2**16 elements
    add(case_uniform(sm1, [7], 0.1, 0.7))
    add(case_uniform(rawF, [2, 3], -3.3, 2.2))
    add(case_uniform(big, [5], 2.0, 2.5))
    add(case_uniform(tera, [4], -1e30, 1e30))
    add(case_uniform(s42, [3, 1, 5], -5.0, 5.0))
    add(case_uniform(rawR, [9], minval=-2.0))
    add(case_uniform(s1701, [5], maxval=3.5))
    add(case_uniform(s0, [0], -1.0, 1.0))
    add(case_uniform(negbig, [13], -0.5, 0.5))
    add(case_uniform(s42, [2, 2], 0.0, 1.0))
    add(case_uniform(u31, [3, 5], -7.25, 100.0))

    # random.randint: small and full int32 spans, spans above 2**16 (JAX's multiplier wraps to
    # 0), powers of two, empty spans (maxval <= minval), uint32 with negative bounds, 0-d,
    # empty and > 2**16-element shapes; bounds beyond int32 are refused by JAX (skipped).
    add(case_randint(s0, [5], 0, 10))
    add(case_randint(s42, [3, 4], -5, 5))
    add(case_randint(s0, [8], -2**31, 2**31 - 1))
    add(case_randint(s1701, [6], 0, 2**16 + 1))
    add(case_randint(sm1, [9], -100, 100000))
    add(case_randint(s1, [7], 0, 1))
    add(case_randint(s42, [4], 0, 256))
    add(case_randint(s0, [3], 3, 3))
    add(case_randint(s0, [3], 5, 2))
    add(case_randint(s42, [], -7, 7))
    add(case_randint(rawF, [0], 0, 10))
    add(case_randint(big, [257, 257], 0, 1000))  # > 2**16 elements
    add(case_randint(tera, [2, 3], 2**31 - 10, 2**31 - 1))
    add(case_randint(s0, [6], 0, 100000, "uint32"))
    add(case_randint(s42, [6], -5, 100000, "uint32"))
    add(case_randint(s1, [5], -9, -3, "uint32"))
    add(case_randint(rawR, [5], 0, 2**31 - 1, "uint32"))
    add(case_randint(s0, [4], 0, 10, "int32"))
    add(case_randint(s0, [2], 0, 2**31))
    add(case_randint(s0, [2], -2**31 - 1, 0))

    # random.normal
    add(case_normal(s0, [3]))
    add(case_normal(s0, []))
    add(case_normal(s42, [1]))
    add(case_normal(s42, [2, 3]))
    add(case_normal(sm1, [7, 5]))
    add(case_normal(rawF, [4]))
    add(case_normal(big, [3, 1, 5]))
    add(case_normal(s1, [65537]))  # > 2**16 elements
    add(case_normal(tera, [11]))

    # random.truncated_normal
    add(case_truncated_normal(s0, -2.0, 2.0, [3]))
    add(case_truncated_normal(s0, -2.0, 2.0, []))
    add(case_truncated_normal(s42, -1.0, 1.0, [2, 3]))
    add(case_truncated_normal(sm1, 0.0, 3.0, [7]))
    add(case_truncated_normal(rawF, -0.5, 0.25, [5]))
    add(case_truncated_normal(big, -4.0, 4.0, [3, 3]))
    add(case_truncated_normal(tera, -10.0, 0.5, [11]))
    add(case_truncated_normal(s1, -2.0, 2.0, [1000]))
    add(case_truncated_normal(negbig, -3.0, -1.0, [4, 2]))
    # Bounds whose erf lands near XLA's saturation point (|x/sqrt2| ~ 3.74) or that are not
    # symmetric: they pin XLA's constant folding of x/sqrt(2) and its erf saturation.
    add(case_truncated_normal(s42, -1.5, 3.0, [64]))
    add(case_truncated_normal(s1, -5.3, 5.3, [64]))
    add(case_truncated_normal(s0, 5.25, 5.35, [16]))
    add(case_truncated_normal(sm1, -5.5, -5.25, [16]))

    # initializer
    I = case_init
    add(I("zeros", s0, [3, 4]))
    add(I("zeros", s1, [5]))
    add(I("zeros", s42, []))
    add(I("ones", s0, [3, 4]))
    add(I("ones", s42, [2, 3, 4]))
    add(I("ones", s1, [1]))

    add(I("constant", s0, [3, 4], {"value": 0.5}))
    add(I("constant", s42, [5, 7], {"value": -2.0}))
    add(I("constant", s1, [], {"value": 3.25}))
    add(I("constant", sm1, [2], {"value": 1e-05}))

    add(I("normal", s0, [3, 4], {}))
    add(I("normal", s42, [5, 7], {"stddev": 1.0}))
    add(I("normal", s1, [300, 3], {"stddev": 0.5}))
    add(I("normal", sm1, [7], {"stddev": 2.0}))
    add(I("normal", big, [2, 2]))

    add(I("uniform", s0, [3, 4], {}))
    add(I("uniform", s42, [5, 7], {"scale": 1.0}))
    add(I("uniform", s1, [2, 3], {"scale": 10.0}))
    add(I("uniform", sm1, [1, 1], {"scale": 0.3}))
    add(I("uniform", tera, [4]))

    add(I("truncated_normal", s0, [3, 4], {}))
    add(I("truncated_normal", s1, [5, 7], {"stddev": 1.0}))
    add(I("truncated_normal", s42, [2, 3], {"stddev": 5.0}))
    add(I("truncated_normal", sm1, [300, 3], {"stddev": 0.02, "lower": -1.0, "upper": 1.0}))
    add(I("truncated_normal", s42, [8, 9], {"stddev": 0.7, "lower": -1.5, "upper": 3.0}))
    add(I("truncated_normal", big, [4, 6], {"stddev": 1.0, "lower": -3.0, "upper": 0.5}))
    add(I("truncated_normal", rawF, [6]))

    add(I("lecun_normal", s0, [3, 4], {}))
    add(I("lecun_normal", s42, [5, 7], {}))
    add(I("lecun_normal", s1, [300, 3], {}))
    add(I("lecun_normal", sm1, [3, 3, 4, 8], {}))
    add(I("lecun_normal", big, [2, 3, 4], {"batch_axis": 0}))
    add(I("lecun_normal", rawR, [1, 1]))

    add(I("lecun_uniform", s0, [3, 4], {}))
    add(I("lecun_uniform", s42, [5, 7], {}))
    add(I("lecun_uniform", s1, [3, 3, 4, 8], {}))
    add(I("lecun_uniform", tera, [1, 1]))

    add(I("glorot_normal", s0, [3, 4], {}))
    add(I("glorot_normal", s42, [5, 7], {}))
    add(I("glorot_normal", s1, [3, 3, 4, 8], {}))
    add(I("glorot_normal", sm1, [4, 5], {"in_axis": 0, "out_axis": 1}))

    add(I("glorot_uniform", s0, [3, 4], {}))
    add(I("glorot_uniform", s42, [5, 7], {}))
    add(I("glorot_uniform", s1, [300, 3], {}))
    add(I("glorot_uniform", big, [2, 3, 4], {"batch_axis": 0}))
    add(I("glorot_uniform", negbig, [3, 3, 4, 8]))

    add(I("xavier_normal", s0, [3, 4], {}))
    add(I("xavier_normal", s42, [2, 5], {}))
    add(I("xavier_uniform", s0, [3, 4], {}))
    add(I("xavier_uniform", s42, [7, 2], {}))

    add(I("he_normal", s0, [3, 4], {}))
    add(I("he_normal", s42, [5, 7], {}))
    add(I("he_normal", s1, [3, 3, 4, 8], {}))
    add(I("he_normal", rawF, [2, 3]))

    add(I("he_uniform", s0, [3, 4], {}))
    add(I("he_uniform", s42, [5, 7], {}))
    add(I("he_uniform", s1, [3, 3, 4, 8], {}))

    add(I("kaiming_normal", s0, [3, 4], {}))
    add(I("kaiming_normal", s42, [6, 2], {}))
    add(I("kaiming_uniform", s0, [3, 4], {}))
    add(I("kaiming_uniform", s42, [6, 2], {}))

    # variance_scaling: every mode x every distribution, then axis arguments.
    keys = [s0, s1, s42, sm1, big, tera, rawF, rawR, negbig, u31, s1701]
    scales = [1.0, 0.5, 2.0, 0.1]
    shapes = [[5, 7], [3, 4], [7, 5], [300, 3]]
    i = 0
    for mode in _variance_scaling_modes():
        for dist in ("truncated_normal", "normal", "uniform"):
            add(I("variance_scaling", keys[i % len(keys)], shapes[i % len(shapes)],
                  {"scale": scales[i % len(scales)], "mode": mode, "distribution": dist}))
            i += 1
    add(I("variance_scaling", s0, [3, 3, 4, 8],
          {"scale": 1.0, "mode": "fan_avg", "distribution": "uniform", "in_axis": [0, 1, 2], "out_axis": 3}))
    add(I("variance_scaling", s42, [3, 3, 4, 8],
          {"scale": 2.0, "mode": "fan_in", "distribution": "truncated_normal"}))
    add(I("variance_scaling", s1, [4, 6],
          {"scale": 1.0, "mode": "fan_in", "distribution": "normal", "in_axis": -1, "out_axis": -2}))
    add(I("variance_scaling", sm1, [2, 3, 4],
          {"scale": 1.0, "mode": "fan_out", "distribution": "truncated_normal", "batch_axis": 0}))
    add(I("variance_scaling", big, [2, 3, 5, 4],
          {"scale": 0.5, "mode": "fan_avg", "distribution": "uniform", "batch_axis": [0, 1]}))
    add(I("variance_scaling", tera, [5],
          {"scale": 1.0, "mode": "fan_in", "distribution": "uniform", "in_axis": 0, "out_axis": 0}))
    add(I("variance_scaling", rawR, [1, 1],
          {"scale": 3.0, "mode": "fan_avg", "distribution": "normal"}))
    add(I("variance_scaling", s1701, [3, 5, 7],
          {"scale": 1.0, "mode": "fan_out", "distribution": "uniform"}))

    out = [c for c in out if c is not None]  # None: inputs JAX rejected (listed in SKIPPED)
    covered = {c["inputs"]["name"] for c in out if c["problem"] == "initializer"}
    assert covered == set(INITIALIZER_NAMES), set(INITIALIZER_NAMES) - covered
    return out


def legacy_cases() -> list[dict]:
    """A smaller set for random_legacy.json (generated with threefry_partitionable=False)."""
    SKIPPED.clear()
    out: list = []
    add = out.append
    s0, s1, s42, s1701, sm1 = kseed(0), kseed(1), kseed(42), kseed(1701), kseed(-1)
    rawF = kraw(0xFFFFFFFF, 0xFFFFFFFF)

    for seed in (0, -1):
        add(case_key(seed))

    add(case_split(s0, 4))
    add(case_split(s0, None))
    add(case_split(s42, 3))
    add(case_split(rawF, 5))

    add(case_fold_in(s0, 1))
    add(case_fold_in(s42, 2**31))

    add(case_bits(s1701, [3]))
    add(case_bits(s0, [7]))
    add(case_bits(s42, [2, 3]))
    add(case_bits(s0, []))

    add(case_uniform(s0, [3]))
    add(case_uniform(s42, [3, 3], -5.0, 5.0))
    add(case_uniform(s1, [7], 0.1, 0.7))

    add(case_randint(s0, [5], 0, 10))
    add(case_randint(s42, [7], -2**31, 2**31 - 1))
    add(case_randint(s1, [4], -5, 100000, "uint32"))

    add(case_normal(s0, [7]))
    add(case_normal(s42, [2, 3]))
    add(case_normal(sm1, []))

    add(case_truncated_normal(s0, -2.0, 2.0, [5]))
    add(case_truncated_normal(s42, -1.0, 1.0, [2, 3]))

    add(case_init("lecun_normal", s42, [2, 3], {}))
    add(case_init("glorot_uniform", s42, [2, 3], {}))
    add(case_init("he_normal", s42, [2, 3], {}))
    add(case_init("truncated_normal", s42, [2, 3], {"stddev": 5.0}))
    add(case_init("uniform", s42, [2, 3], {"scale": 10.0}))
    add(case_init("variance_scaling", s1, [3, 5],
                  {"scale": 1.0, "mode": "fan_avg", "distribution": "normal"}))
    return [c for c in out if c is not None]
