"""The CNN train step beside JAX (docs/PERFORMANCE.md, "CNN: the train step"): the contract's
CNN with batch norm (features (32, 64), dots_saveable, 10 classes) on 8x8x1 images, batches of
32, Adam; JAX's jitted step (value_and_grad with the statistics as aux, optax update) against
flaxpp's ClassifierStep on the same batches, the latter timed through a `cnn_train` reference
case of 1 and of STEPS + 1 steps run by `flaxpp check` (the difference over STEPS: start-up,
tracing and the first step left out). Best of 3 for both.

Run: ``python_compat/.venv/bin/python python_compat/cnn_speed.py [build/src/flaxpp]``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import optax  # noqa: E402

from problems_cnn import CNN  # noqa: E402

N, BS, STEPS, REPS = 256, 32, 400, 3


def jax_ms(x: np.ndarray, y: np.ndarray) -> float:
    model = CNN((32, 64), 10, "dots_saveable", True)
    v = model.init(jax.random.PRNGKey(0), jnp.asarray(x[:BS]))
    params, stats = v["params"], v["batch_stats"]
    tx = optax.adam(0.003)
    opt = tx.init(params)

    def loss_fn(p, st, xb, yb):
        logits, upd = model.apply({"params": p, "batch_stats": st}, xb, True,
                                  mutable=["batch_stats"])
        return optax.softmax_cross_entropy_with_integer_labels(logits, yb).mean(), upd["batch_stats"]

    @jax.jit
    def step(p, o, st, xb, yb):
        (loss, st), g = jax.value_and_grad(loss_fn, has_aux=True)(p, st, xb, yb)
        u, o = tx.update(g, o, p)
        return optax.apply_updates(p, u), o, st, loss

    rows = [[(i * BS + j) % N for j in range(BS)] for i in range(STEPS)]
    batches = [(jnp.asarray(x[r]), jnp.asarray(y[r])) for r in rows]
    params, opt, stats, loss = step(params, opt, stats, *batches[0])
    loss.block_until_ready()
    best = float("inf")
    for _ in range(REPS):
        t = time.perf_counter()
        for xb, yb in batches:
            params, opt, stats, loss = step(params, opt, stats, xb, yb)
        loss.block_until_ready()
        best = min(best, (time.perf_counter() - t) / STEPS * 1e3)
    return best


def flaxpp_ms(binary: str, x: np.ndarray, y: np.ndarray) -> float:
    case = {"id": "bench", "problem": "cnn_train", "inputs": {
        "seed": 0, "x": {"dtype": "float32", "shape": list(x.shape), "data": x.ravel().tolist()},
        "y": {"dtype": "int32", "shape": [N], "data": y.tolist()}, "features": [32, 64],
        "classes": 10, "policy": "dots_saveable", "use_batchnorm": True,
        "optimizer": {"name": "adam", "learning_rate": 0.003}, "batch_size": BS},
        "expected": {"dtype": "float32", "shape": [1], "data": [0]}}
    with tempfile.TemporaryDirectory() as tmp:
        files = {}
        for steps in (1, STEPS + 1):
            case["inputs"]["steps"] = steps
            files[steps] = os.path.join(tmp, f"{steps}.json")
            with open(files[steps], "w") as f:
                json.dump({"format": "flaxpp.refs/1", "cases": [case]}, f)

        def run(steps: int) -> float:
            t = time.perf_counter()
            subprocess.run([binary, "check", files[steps]], capture_output=True,
                           env={**os.environ, "FLAXPP_DEVICE": "cpu"})
            return time.perf_counter() - t

        return min((run(STEPS + 1) - run(1)) / STEPS * 1e3 for _ in range(REPS))


def main() -> None:
    binary = sys.argv[1] if len(sys.argv) > 1 else "build/src/flaxpp"
    rng = np.random.default_rng(0)
    x = rng.standard_normal((N, 8, 8, 1)).astype(np.float32)
    y = (np.arange(N) % 10).astype(np.int32)
    j, f = jax_ms(x, y), flaxpp_ms(binary, x, y)
    print(f"CNN((32, 64), batch norm, dots_saveable), batches of {BS} 8x8x1, Adam; ms per step")
    print(f"| flaxpp | JAX | flaxpp / JAX |\n| --- | --- | --- |\n| {f:.3f} | {j:.3f} | {f / j:.2f} |")


if __name__ == "__main__":
    main()
