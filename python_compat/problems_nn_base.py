"""What the module problems (problems_nn.py, problems_nn_layers.py) share.

The integer inputs as Flax/JAX take them (``as_int``, ``prng``), Flax's static-path hash,
case-id tags, the float32 input draws, the seeds beyond int32 both case lists use (``S31``,
``S32``, ``NEG``), and the robustness check of every float result against its NumPy float32
recomputation (``_check_close``, with ``seq_sum`` for sequential float32 sums), whose worst
ratio to the tolerance is kept in ``STATS``. problems_nn.py's docstring says what the cases
are and how they are checked.
"""

from __future__ import annotations

import hashlib
import math
from typing import Any, Sequence

import jax
import numpy as np

#: Largest observed |JAX - NumPy-float32 (perturbed kernels)| / tolerance (diagnostics).
STATS: dict[str, float] = {"max_err_over_tol": 0.0}

S31 = 2**31 + 5  # >= 2^31: PRNGKey/key with x64 off give [0, seed mod 2^32]
S32 = 2**32 + 3  # >= 2^32: wraps to [0, 3]
NEG = -2**31 - 7  # below int32: [0, seed mod 2^32]


# --------------------------------------------------------------------------- helpers


def as_int(v: Any) -> int:
    """An int input that may be written as an integral float (the Flax originals use int())."""
    if isinstance(v, float):
        assert v == math.floor(v), v
    return int(v)


def prng(seed: Any):
    return jax.random.PRNGKey(as_int(seed))


def flax_hash(*parts: str | int) -> int:
    """Flax's ``_fold_in_static`` hash (flax_fix_rng_separator=False): first 4 bytes of SHA-1."""
    data = b""
    for p in parts:
        if isinstance(p, str):
            data += p.encode("utf-8")
        else:
            data += int(p).to_bytes((int(p).bit_length() + 7) // 8, "big")
    return int.from_bytes(hashlib.sha1(data).digest()[:4], "big")


def _np(v) -> np.ndarray:
    return np.asarray(jax.device_get(v))


def _tag(v: Any) -> str:
    """Case-id label of a scalar input; integral floats keep a trailing '.0'."""
    if isinstance(v, float):
        return repr(v)
    return str(v)


def feats_tag(features: Sequence[Any]) -> str:
    return "_".join(_tag(h) for h in features)


def draw_x(shape: Sequence[int], xseed: int, *, scale: float = 1.0, offset: float = 0.0,
           zero_rows: Sequence[int] = ()) -> np.ndarray:
    """float32 N(offset, scale^2) draws from numpy.random.default_rng(xseed).

    ``zero_rows`` zero whole rows of the flattened [-1, D] view (exact-zero probes)."""
    rng = np.random.default_rng(xseed)
    x = (rng.standard_normal(tuple(shape)) * scale + offset).astype(np.float32)
    if zero_rows:
        flat = x.reshape(-1, x.shape[-1])
        flat[list(zero_rows), :] = 0.0
        x = flat.reshape(x.shape)
    return x


def _max_abs(arrays: Sequence[np.ndarray]) -> float:
    vals = [float(np.max(np.abs(a))) for a in arrays if a.size]
    return max(vals) if vals else 0.0


def _check_close(label: str, got: np.ndarray, want: np.ndarray, tol: dict,
                 limit: float = 0.5) -> None:
    """NumPy recomputation ``got`` must be within ``limit`` x tolerance of JAX's ``want``."""
    assert got.shape == want.shape, (label, got.shape, want.shape)
    g64, w64 = got.astype(np.float64), want.astype(np.float64)
    nan_w, nan_g = np.isnan(w64), np.isnan(g64)
    assert np.array_equal(nan_w, nan_g), f"{label}: NaN pattern differs"
    inf_w = np.isinf(w64)
    assert np.array_equal(g64[inf_w], w64[inf_w]), f"{label}: inf differs"
    fin = ~nan_w & ~inf_w
    err = np.abs(g64[fin] - w64[fin])
    allowed = tol["atol"] + tol["rtol"] * np.abs(w64[fin])
    if err.size == 0:
        return
    if np.any(allowed == 0):
        assert np.all(err[allowed == 0] == 0), f"{label}: exact element differs"
        ratio = float(np.max(err[allowed > 0] / allowed[allowed > 0])) if np.any(allowed > 0) else 0.0
    else:
        ratio = float(np.max(err / allowed))
    if ratio > STATS["max_err_over_tol"]:
        STATS["max_err_over_tol"], STATS["max_err_case"] = ratio, label
    if ratio > limit:
        raise AssertionError(f"{label}: NumPy float32 differs from JAX by {ratio:.3g} x tolerance")


def seq_sum(a: np.ndarray) -> np.float32:
    """Sequential float32 sum (another summation order than XLA's)."""
    flat = a.reshape(-1).astype(np.float32)
    return np.cumsum(flat, dtype=np.float32)[-1] if flat.size else np.float32(0)
