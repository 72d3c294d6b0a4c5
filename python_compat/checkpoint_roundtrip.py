"""Proves flaxpp's checkpoint I/O interoperates with real Flax and safetensors.

A developer check, not part of CI (CI has no Python).  It builds a Flax MLP's params and an
optax adam state after a few real training steps, plus arrays of every dtype flaxpp
checkpoints hold (NaN with a payload, +-inf, -0.0, denormals, 0-d, empty, a numpy scalar),
writes them with ``flax.serialization.to_bytes``, has the C++ program
``flaxpp_checkpoint_convert`` (tools/) convert them between msgpack, safetensors and flaxpp
JSON, and checks every result against the original bit for bit:

* flaxpp reads Flax msgpack (plain and chunked) and writes msgpack that
  ``flax.serialization.msgpack_restore`` / ``from_bytes`` restore into the original optax
  state; the bytes equal what Flax itself writes for the same (key-sorted) state dict,
  chunked layout included;
* flaxpp's safetensors load with the ``safetensors`` package and vice versa;
* flaxpp's JSON equals the JSON this script writes, and reads back to the same arrays
  (NaN payloads aside: JSON spells every NaN "NaN").

Usage (from the repository root, after building flaxpp):

    python_compat/.venv/bin/python python_compat/checkpoint_roundtrip.py \
        [--convert build/tools/flaxpp_checkpoint_convert]
    python_compat/.venv/bin/python python_compat/checkpoint_roundtrip.py \
        --write-fixtures tests/io/fixtures

Exits non-zero on any mismatch.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import msgpack  # noqa: E402
import numpy as np  # noqa: E402
import optax  # noqa: E402
from flax import linen as nn  # noqa: E402
from flax import serialization  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
JSON_FORMAT = "flaxpp.checkpoint/1"
# Small enough that most arrays of the test state are written in Flax's chunked layout.
SMALL_CHUNK_BYTES = 16


class MLP(nn.Module):
    features: tuple[int, ...]

    @nn.compact
    def __call__(self, x):
        for i, f in enumerate(self.features):
            x = nn.Dense(f)(x)
            if i + 1 < len(self.features):
                x = nn.relu(x)
        return x


def training_state(steps: int = 3):
    """(params, opt_state, step) of an MLP 4 -> 8 -> 3 after `steps` adam steps."""
    model = MLP((8, 3))
    x = jax.random.normal(jax.random.key(1), (5, 4))
    params = model.init(jax.random.key(0), x)
    tx = optax.adam(1e-2)
    opt_state = tx.init(params)

    def loss(p):
        return jnp.mean(model.apply(p, x) ** 2)

    for _ in range(steps):
        grads = jax.grad(loss)(params)
        updates, opt_state = tx.update(grads, opt_state, params)
        params = optax.apply_updates(params, updates)
    return params, opt_state, jnp.int32(steps)


def dtype_cases() -> dict[str, Any]:
    """Every dtype and the values that break naive float I/O (keys sorted)."""
    nan_payload_f32 = np.array([0x7FC00123, 0xFFC00000], dtype=np.uint32).view(np.float32)
    nan_payload_f64 = np.array([0x7FF8000000000123], dtype=np.uint64).view(np.float64)
    f32_info, f64_info = np.finfo(np.float32), np.finfo(np.float64)
    f32 = np.array(
        [np.inf, -np.inf, -0.0, 0.0, f32_info.smallest_subnormal, -f32_info.smallest_subnormal,
         f32_info.smallest_normal * 0.75, f32_info.tiny, f32_info.max, 1.0 / 3.0, 0.1],
        dtype=np.float32)
    f64 = np.array(
        [np.inf, -np.inf, -0.0, f64_info.smallest_subnormal, f64_info.max, 1.0 / 3.0, 0.1],
        dtype=np.float64)
    return {
        "bool": np.array([[True, False, True], [False, False, True]]),
        "empty_f32": np.zeros((0,), np.float32),
        "empty_i32": np.zeros((2, 0, 3), np.int32),
        "f32": np.concatenate([f32, nan_payload_f32]).reshape(13, 1),
        "f64": np.concatenate([f64, nan_payload_f64]),
        "i32": np.array([np.iinfo(np.int32).min, -1, 0, 1, np.iinfo(np.int32).max], np.int32),
        "nested": {"deeper": {"scalar_f64": np.asarray(np.float64(-2.5))}},
        "numpy_scalar": np.float32(1.5),  # an np.generic: Flax writes ExtType 3
        "scalar_f32": np.asarray(np.float32(7.25)),
        "u32": np.array([0, 1, 2**31, 2**32 - 1], np.uint32),
    }


def flax_state() -> dict[str, Any]:
    """The state dict every check uses (as flax.serialization.to_state_dict sees it)."""
    params, opt_state, step = training_state()
    return serialization.to_state_dict(
        {"dtype_cases": dtype_cases(), "opt_state": opt_state, "params": params, "step": step})


def flatten(tree: Any, prefix: str = "") -> dict[str, np.ndarray]:
    """'/'-joined paths -> numpy arrays (the names flaxpp gives safetensors tensors)."""
    if isinstance(tree, dict):
        out: dict[str, np.ndarray] = {}
        for k, v in tree.items():
            out.update(flatten(v, f"{prefix}/{k}" if prefix else str(k)))
        return out
    return {prefix: np.asarray(tree)}


def sorted_numpy(tree: Any) -> Any:
    """The tree with sorted dict keys and every leaf an ndarray (flaxpp's view of it)."""
    if isinstance(tree, dict):
        return {k: sorted_numpy(tree[k]) for k in sorted(tree)}
    return np.asarray(tree)


def json_value(x: Any) -> Any:
    if isinstance(x, (bool, np.bool_)):
        return bool(x)
    if isinstance(x, (int, np.integer)):
        return int(x)
    x = float(x)
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    return x  # repr of the double: exact for float32 values too


def tree_json(tree: Any) -> Any:
    if isinstance(tree, dict):
        return {k: tree_json(v) for k, v in tree.items()}
    a = np.asarray(tree)
    return {"dtype": a.dtype.name, "shape": list(a.shape),
            "data": [json_value(v) for v in a.reshape(-1).tolist()]}


def checkpoint_json(state: dict[str, Any]) -> str:
    return json.dumps({"format": JSON_FORMAT, "tree": tree_json(state)}, allow_nan=False) + "\n"


def chunked_to_bytes(state: dict[str, Any], max_chunk: int) -> bytes:
    saved = serialization.MAX_CHUNK_SIZE
    serialization.MAX_CHUNK_SIZE = max_chunk  # read by _chunk_array_leaves_in_place at call time
    try:
        return serialization.to_bytes(state)
    finally:
        serialization.MAX_CHUNK_SIZE = saved


def write_fixtures(out: Path) -> None:
    state = flax_state()
    out.mkdir(parents=True, exist_ok=True)
    files = {
        "flax_params.msgpack": serialization.to_bytes(state),
        "flax_params_chunked.msgpack": chunked_to_bytes(state, SMALL_CHUNK_BYTES),
        "flax_params.json": checkpoint_json(state).encode(),
    }
    for name, data in files.items():
        (out / name).write_bytes(data)
        print(f"wrote {out / name} ({len(data)} bytes)")


class Checker:
    def __init__(self) -> None:
        self.failures = 0

    def same(self, what: str, got: dict[str, np.ndarray], want: dict[str, np.ndarray],
             nan_as_nan: bool = False) -> None:
        problems = []
        if set(got) != set(want):
            problems.append(f"paths differ: only got {sorted(set(got) - set(want))}, "
                            f"only expected {sorted(set(want) - set(got))}")
        for path in sorted(set(got) & set(want)):
            g, w = got[path], want[path]
            if g.dtype != w.dtype or g.shape != w.shape:
                problems.append(f"{path}: got {g.dtype}{list(g.shape)}, "
                                f"expected {w.dtype}{list(w.shape)}")
                continue
            if nan_as_nan and g.dtype.kind == "f":
                nan = np.isnan(w)
                if not (np.array_equal(np.isnan(g), nan)
                        and g[~nan].tobytes() == w[~nan].tobytes()):
                    problems.append(f"{path}: values differ: got {g!r}, expected {w!r}")
            elif g.tobytes() != w.tobytes():
                problems.append(f"{path}: values differ: got {g!r}, expected {w!r}")
        self.report(what, problems, f"{len(want)} arrays bit-exact")

    def equal(self, what: str, ok: bool, detail: str) -> None:
        self.report(what, [] if ok else [detail], detail if ok else "")

    def report(self, what: str, problems: list[str], ok_detail: str) -> None:
        if problems:
            self.failures += 1
            print(f"FAIL {what}")
            for p in problems[:20]:
                print(f"     {p}")
        else:
            print(f"ok   {what}: {ok_detail}")


def run_roundtrip(convert: Path) -> int:
    state = flax_state()
    params, opt_state, step = training_state()
    want = flatten(state)
    check = Checker()
    with tempfile.TemporaryDirectory(prefix="flaxpp_ckpt_") as tmp_name:
        tmp = Path(tmp_name)
        (tmp / "flax.msgpack").write_bytes(serialization.to_bytes(state))
        (tmp / "flax_chunked.msgpack").write_bytes(chunked_to_bytes(state, SMALL_CHUNK_BYTES))
        (tmp / "expected.json").write_text(checkpoint_json(state))
        try:
            from safetensors.numpy import load_file, save_file
        except ImportError:
            load_file = save_file = None
            print("skip safetensors checks: the safetensors package is not installed "
                  "(bash python_compat/setup_venv.sh installs it)")
        if save_file is not None:
            save_file(want, str(tmp / "python.safetensors"))

        def convert_file(src: str, dst: str, *extra: str) -> None:
            cmd = [str(convert), *extra, str(tmp / src), str(tmp / dst)]
            result = subprocess.run(cmd, capture_output=True, text=True)
            if result.returncode != 0:
                sys.exit(f"{' '.join(cmd)} failed ({result.returncode}):\n{result.stderr}")

        convert_file("flax.msgpack", "cpp.msgpack")
        convert_file("flax.msgpack", "cpp.safetensors")
        convert_file("flax.msgpack", "cpp.json")
        convert_file("flax.msgpack", "cpp_chunked.msgpack", "--max-chunk-bytes",
                     str(SMALL_CHUNK_BYTES))
        convert_file("flax_chunked.msgpack", "from_chunked.msgpack")
        convert_file("expected.json", "from_json.msgpack")
        if save_file is not None:
            convert_file("python.safetensors", "from_python_safetensors.msgpack")

        cpp_bytes = (tmp / "cpp.msgpack").read_bytes()
        check.same("Flax msgpack -> flaxpp -> msgpack_restore",
                   flatten(serialization.msgpack_restore(cpp_bytes)), want)
        restored = serialization.from_bytes(
            {"dtype_cases": dtype_cases(), "opt_state": opt_state, "params": params,
             "step": step}, cpp_bytes)
        check.equal("from_bytes restores optax's adam state types",
                    type(restored["opt_state"][0]) is type(opt_state[0])
                    and isinstance(restored["opt_state"][1], optax.EmptyState),
                    "ScaleByAdamState and EmptyState rebuilt")
        check.same("from_bytes(target) leaves", flatten(serialization.to_state_dict(restored)),
                   want)
        flax_sorted = serialization.msgpack_serialize(sorted_numpy(state))
        check.equal("flaxpp's msgpack bytes == Flax's to_bytes of the key-sorted state",
                    cpp_bytes == flax_sorted, f"{len(cpp_bytes)} bytes identical")
        if cpp_bytes != flax_sorted:
            print(f"     flaxpp wrote {len(cpp_bytes)} bytes, Flax {len(flax_sorted)}")

        chunked = (tmp / "cpp_chunked.msgpack").read_bytes()
        raw = msgpack.unpackb(chunked, strict_map_key=False)
        check.equal("flaxpp writes Flax's chunked layout",
                    "__msgpack_chunked_array__" in raw["params"]["params"]["Dense_0"]["kernel"],
                    "params/params/Dense_0/kernel is a chunked dict")
        check.same("flaxpp chunked msgpack -> msgpack_restore",
                   flatten(serialization.msgpack_restore(chunked)), want)
        check.equal(f"flaxpp's chunked bytes == Flax's with MAX_CHUNK_SIZE={SMALL_CHUNK_BYTES}",
                    chunked == chunked_to_bytes(sorted_numpy(state), SMALL_CHUNK_BYTES),
                    f"{len(chunked)} bytes identical")
        check.same("Flax chunked msgpack -> flaxpp -> msgpack_restore",
                   flatten(serialization.msgpack_restore(
                       (tmp / "from_chunked.msgpack").read_bytes())), want)

        try:
            got_json = json.loads((tmp / "cpp.json").read_bytes())
        except ValueError as e:
            got_json = f"not JSON: {e}"
        want_json = json.loads((tmp / "expected.json").read_text())
        check.equal("flaxpp JSON == this script's JSON", got_json == want_json,
                    "identical after parsing")
        check.same("this script's JSON -> flaxpp -> msgpack_restore (NaN payloads aside)",
                   flatten(serialization.msgpack_restore(
                       (tmp / "from_json.msgpack").read_bytes())), want, nan_as_nan=True)

        if load_file is not None:
            check.same("flaxpp safetensors -> safetensors.numpy.load_file",
                       load_file(str(tmp / "cpp.safetensors")), want)
            check.same("safetensors.numpy.save_file -> flaxpp -> msgpack_restore",
                       flatten(serialization.msgpack_restore(
                           (tmp / "from_python_safetensors.msgpack").read_bytes())), want)

    if check.failures:
        print(f"{check.failures} check(s) FAILED")
        return 1
    print("all checkpoint round trips match")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--convert", type=Path,
                        default=REPO / "build" / "tools" / "flaxpp_checkpoint_convert",
                        help="the flaxpp_checkpoint_convert binary (default: %(default)s)")
    parser.add_argument("--write-fixtures", type=Path, metavar="DIR",
                        help="write the committed test fixtures to DIR instead "
                             "(tests/io/fixtures)")
    args = parser.parse_args()
    if args.write_fixtures:
        write_fixtures(args.write_fixtures)
        return 0
    if not args.convert.exists():
        sys.exit(f"{args.convert} does not exist; build flaxpp first (cmake --build build) or "
                 "pass --convert PATH")
    return run_roundtrip(args.convert)


if __name__ == "__main__":
    sys.exit(main())
