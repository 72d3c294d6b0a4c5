"""Reference files for your own model: JAX's values and gradients of any JAX function, written
in the ``flaxpp.refs/1`` format (docs/refs-format.md) that your own check program reads
(``refs::check_main`` over a registry with your problems; docs/EXTENDING.md, "Checking your
own model against JAX").

Standalone: it needs only ``jax`` and ``numpy``; copy it next to your JAX code.

    import jax.numpy as jnp
    import numpy as np
    import flaxpp_refs

    def affine_gelu(w, b, x):
        return jax.nn.gelu(x @ w + b)

    rng = np.random.default_rng(0)
    inputs = {"w": rng.normal(size=(3, 4)), "b": rng.normal(size=4), "x": rng.normal(size=(2, 3))}
    flaxpp_refs.write("affine_gelu.json", [
        flaxpp_refs.case("affine_gelu/0", "user.affine_gelu", affine_gelu, inputs,
                         grads=["w", "b"], rtol=1e-5, atol=1e-6),
    ])

Each case's ``expected`` is a tree: ``{"value": fn(**inputs)}`` and, when ``grads`` names
inputs, ``"grads": {name: the gradient of jnp.sum(fn(**inputs)) with respect to it}`` (the
output itself when it is a scalar). Inputs and outputs are float32 unless given otherwise;
``extra`` adds JSON scalars (sizes, seeds, a policy spec) to the inputs, for the problem to
read, after the arrays. The function is called with the arrays and the extras as keywords.
"""

from __future__ import annotations

import json
import math
import os
import re
import tempfile
from typing import Any, Callable, Iterable, Mapping, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax._src.ad_checkpoint import saved_residuals

FORMAT = "flaxpp.refs/1"

# The refs format's dtypes, by NumPy's names.
_DTYPES = ("float32", "float64", "int32", "uint32", "bool")


def _number(v: Any, dtype: str) -> str:
    """One datum as the format writes it: shortest round-trip decimal, non-finite as strings."""
    if dtype == "bool":
        return "true" if bool(v) else "false"
    if dtype in ("int32", "uint32"):
        return str(int(v))
    v = float(v)
    if math.isnan(v):
        return '"NaN"'
    if math.isinf(v):
        return '"Infinity"' if v > 0 else '"-Infinity"'
    return str(np.float32(v)) if dtype == "float32" else repr(v)


def _array(value: Any) -> str:
    a = np.asarray(value)
    if a.dtype.name not in _DTYPES:
        raise ValueError(f"dtype {a.dtype.name} is not one of the refs format's {_DTYPES}; "
                         "cast the array first (e.g. float32)")
    data = ", ".join(_number(v, a.dtype.name) for v in a.reshape(-1))
    return f'{{"dtype": "{a.dtype.name}", "shape": {list(a.shape)}, "data": [{data}]}}'


def _tree(value: Any) -> str:
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{json.dumps(str(k))}: {_tree(v)}" for k, v in value.items()) + "}"
    return _array(value)


def _inputs_field(arrays: Mapping[str, np.ndarray], extra: Mapping[str, Any]) -> str:
    items = [f"{json.dumps(k)}: {_array(v)}" for k, v in arrays.items()]
    items += [f"{json.dumps(k)}: {json.dumps(v)}" for k, v in extra.items()]
    return '"inputs": {' + ", ".join(items) + "}"


def _as_float32(value: Any) -> np.ndarray:
    a = np.asarray(value)
    return a.astype(np.float32) if a.dtype == np.float64 else a


def case(case_id: str, problem: str, fn: Callable[..., Any], inputs: Mapping[str, Any], *,
         grads: Sequence[str] = (), extra: Mapping[str, Any] | None = None,
         rtol: float = 1e-5, atol: float = 1e-6) -> str:
    """One case: ``fn`` run by JAX on ``inputs`` (float64 arrays become float32), its value and
    the gradients named by ``grads``, as a line of the file."""
    arrays = {k: _as_float32(v) for k, v in inputs.items()}
    extra = dict(extra or {})
    unknown = [g for g in grads if g not in arrays]
    if unknown:
        raise ValueError(f"grads names {unknown}, which are not among the inputs {list(arrays)}")

    def call(*diff):
        kwargs = {k: jnp.asarray(v) for k, v in arrays.items()}
        kwargs.update(zip(grads, diff))
        return fn(**kwargs, **extra)

    value = call(*(arrays[g] for g in grads))
    expected: dict[str, Any] = {"value": jax.tree_util.tree_map(np.asarray, value)}
    if grads:
        def loss(*diff):
            out = call(*diff)
            return out if jnp.ndim(out) == 0 else jnp.sum(out)

        g = jax.grad(loss, argnums=tuple(range(len(grads))))(*(arrays[k] for k in grads))
        expected["grads"] = {k: np.asarray(v) for k, v in zip(grads, g)}
    fields = [f'"id": {json.dumps(case_id)}', f'"problem": {json.dumps(problem)}',
              _inputs_field(arrays, extra), f'"expected": {_tree(expected)}',
              f'"rtol": {rtol!r}', f'"atol": {atol!r}']
    return "{" + ", ".join(fields) + "}"


_NAMED_RE = re.compile(r"^named '(.*?)'")
_DOT_RE = re.compile(r"^output of dot_general( |$)")


def residual_kind(desc: str) -> str:
    """The refs format's ``kind`` of one ``saved_residuals`` description string."""
    if desc.startswith("from the argument"):
        return "argument"
    if desc.startswith("from a constant"):
        return "constant"
    if desc.startswith("from a literal"):
        return "literal"
    m = _NAMED_RE.match(desc)
    if m:
        return f"named:{m.group(1)}"
    if _DOT_RE.match(desc):
        return "dot_general"
    return "other"


def residual_records(res) -> list[dict]:
    """The expected value of a ``saved_residuals`` case: one ``{"dtype","shape","kind"}`` per
    entry of JAX's list."""
    return [{"dtype": np.dtype(aval.dtype).name, "shape": [int(s) for s in aval.shape],
             "kind": residual_kind(desc)} for aval, desc in res]


def residuals_case(case_id: str, problem: str, fn: Callable[..., Any],
                   inputs: Mapping[str, Any], policy: Any, *,
                   extra: Mapping[str, Any] | None = None) -> str:
    """One case of the values ``jnp.sum(fn(**inputs))`` keeps for its backward pass under
    ``jax.checkpoint(..., policy=policy)`` (a JAX policy; name it in ``extra`` too, as a refs
    policy spec, for your problem to read), differentiated with respect to every input:
    ``jax._src.ad_checkpoint.saved_residuals``, as records compared as a multiset."""
    arrays = {k: _as_float32(v) for k, v in inputs.items()}
    extra = dict(extra or {})
    names = list(arrays)

    def loss(*args):
        return jnp.sum(fn(**dict(zip(names, args)), **extra))

    res = saved_residuals(jax.checkpoint(loss, policy=policy), *arrays.values())
    fields = [f'"id": {json.dumps(case_id)}', f'"problem": {json.dumps(problem)}',
              _inputs_field(arrays, extra), f'"expected": {json.dumps(residual_records(res))}',
              '"rtol": 0', '"atol": 0']
    return "{" + ", ".join(fields) + "}"


def write(path: str, cases: Iterable[str]) -> None:
    """Writes the cases as one ``flaxpp.refs/1`` file, atomically (a temporary file renamed)."""
    versions = {"jax": jax.__version__,
                "jax_threefry_partitionable": bool(jax.config.jax_threefry_partitionable)}
    text = ('{"format": "' + FORMAT + '", "generator": "python_compat/flaxpp_refs.py", '
            f'"versions": {json.dumps(versions)}, "cases": [\n' + ",\n".join(cases) + "\n]}\n")
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".flaxpp_refs.")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise
