"""Writer for flaxpp reference-case files (format ``flaxpp.refs/1``).

See docs/refs-format.md (a verbatim copy of the shared contract).  This module knows nothing
about JAX; it only turns Python/NumPy values into the JSON layout:

* arrays (``numpy.ndarray`` wrapped with :func:`array`) become
  ``{"dtype", "shape", "data"}`` with row-major ``data``;
* float32 data is written with the shortest decimal string that round-trips to the
  same float32 (NumPy's ``str(np.float32(v))``), float64 data and Python floats with
  Python's ``repr``; non-finite floats become the strings ``"NaN"``, ``"Infinity"``,
  ``"-Infinity"``;
* uint32/int32 data are JSON integers, bool data ``true``/``false``.

Output layout: a small header, then one case per line.  Serialisation is fully
deterministic (dict insertion order, fixed number formatting).
"""

from __future__ import annotations

import json
import math
import os
from collections import Counter
from typing import Any, Iterable, Mapping

import numpy as np

FORMAT = "flaxpp.refs/1"
GENERATOR = "python_compat/gen_refs.py"

_DTYPES = {
    "float32": np.float32,
    "float64": np.float64,
    "int32": np.int32,
    "uint32": np.uint32,
    "bool": np.bool_,
}


class Array:
    """A NumPy array tagged with one of the dtypes of the refs format."""

    __slots__ = ("value", "dtype")

    def __init__(self, value: Any, dtype: str | None = None):
        arr = np.asarray(value)
        if dtype is None:
            dtype = arr.dtype.name
        if dtype not in _DTYPES:
            raise ValueError(f"unsupported refs dtype {dtype!r}")
        np_dtype = _DTYPES[dtype]
        if arr.dtype != np_dtype:
            # Only allow lossless conversions (e.g. Python ints -> uint32).
            conv = arr.astype(np_dtype)
            if arr.size and not np.array_equal(conv.astype(arr.dtype), arr, equal_nan=arr.dtype.kind == "f"):
                raise ValueError(f"value does not fit losslessly into {dtype}")
            arr = conv
        # np.array (not np.ascontiguousarray, which turns 0-d arrays into 1-d ones).
        value = np.array(arr, order="C", copy=True)
        assert value.shape == arr.shape
        self.value = value
        self.dtype = dtype


def array(value: Any, dtype: str | None = None) -> Array:
    """Wrap ``value`` (array-like) as a refs array of ``dtype`` (default: its own)."""
    return Array(value, dtype)


def _nonfinite(v: float) -> str | None:
    if math.isnan(v):
        return '"NaN"'
    if math.isinf(v):
        return '"Infinity"' if v > 0 else '"-Infinity"'
    return None


def format_float64(v: float) -> str:
    v = float(v)
    nf = _nonfinite(v)
    if nf is not None:
        return nf
    s = repr(v)
    assert float(s) == v or (v == 0.0 and float(s) == 0.0), s
    return s


def format_float32(v: Any) -> str:
    f = np.float32(v)
    nf = _nonfinite(float(f))
    if nf is not None:
        return nf
    s = str(f)  # NumPy: shortest repr that round-trips to float32 (Dragon4, unique)
    if np.float32(float(s)).view(np.uint32) != f.view(np.uint32):
        raise AssertionError(f"float32 {f!r} does not round-trip through {s!r}")
    return s


def _format_data(arr: Array) -> str:
    flat = arr.value.reshape(-1)
    dt = arr.dtype
    if dt == "float32":
        items = [format_float32(x) for x in flat]
    elif dt == "float64":
        items = [format_float64(x) for x in flat.tolist()]
    elif dt in ("int32", "uint32"):
        items = [str(int(x)) for x in flat.tolist()]
    elif dt == "bool":
        items = ["true" if x else "false" for x in flat.tolist()]
    else:  # pragma: no cover - guarded by Array
        raise ValueError(dt)
    return "[" + ",".join(items) + "]"


def dumps(value: Any) -> str:
    """Serialise ``value`` as compact-ish JSON, with refs arrays and float rules."""
    if isinstance(value, Array):
        shape = "[" + ",".join(str(int(d)) for d in value.value.shape) + "]"
        return '{"dtype": "%s", "shape": %s, "data": %s}' % (value.dtype, shape, _format_data(value))
    if isinstance(value, np.ndarray):
        return dumps(Array(value))
    if value is None:
        return "null"
    if isinstance(value, (bool, np.bool_)):
        return "true" if value else "false"
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, np.float32):
        return format_float32(value)
    if isinstance(value, (float, np.floating)):
        return format_float64(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=True)
    if isinstance(value, Mapping):
        parts = []
        for k, v in value.items():
            if not isinstance(k, str):
                raise TypeError(f"JSON object keys must be str, got {k!r}")
            parts.append(json.dumps(k, ensure_ascii=True) + ": " + dumps(v))
        return "{" + ", ".join(parts) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(dumps(v) for v in value) + "]"
    raise TypeError(f"cannot serialise {type(value).__name__}: {value!r}")


def make_case(
    case_id: str,
    problem: str,
    inputs: Mapping[str, Any],
    expected: Any,
    *,
    rtol: float | None = None,
    atol: float | None = None,
    ulp: int | None = None,
) -> dict:
    """Build one case dict with the canonical key order."""
    case: dict = {"id": case_id, "problem": problem, "inputs": dict(inputs), "expected": expected}
    if rtol is not None:
        case["rtol"] = rtol
    if atol is not None:
        case["atol"] = atol
    if ulp is not None:
        case["ulp"] = ulp
    return case


def _reject_constant(name: str):
    raise ValueError(f"non-JSON token {name} in output")


def render(cases: Iterable[Mapping[str, Any]], versions: Mapping[str, Any]) -> str:
    """Render a whole refs file as a string (one case per line)."""
    cases = list(cases)
    ids = [c["id"] for c in cases]
    dup = [i for i, n in Counter(ids).items() if n > 1]
    assert not dup, f"duplicate case ids: {dup}"
    for c in cases:
        assert isinstance(c.get("id"), str) and isinstance(c.get("problem"), str), c
    lines = [
        "{",
        '"format": ' + dumps(FORMAT) + ",",
        '"generator": ' + dumps(GENERATOR) + ",",
        '"versions": ' + dumps(dict(versions)) + ",",
        '"cases": [',
    ]
    body = [dumps(c) for c in cases]
    lines.append(",\n".join(body))
    lines.append("]")
    lines.append("}")
    text = "\n".join(lines) + "\n"
    json.loads(text, parse_constant=_reject_constant)  # valid, strict JSON
    return text


def write_refs(path: str, cases: Iterable[Mapping[str, Any]], versions: Mapping[str, Any]) -> int:
    """Write a refs file; returns its size in bytes."""
    text = render(cases, versions)
    data = text.encode("ascii")
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)
    return len(data)
