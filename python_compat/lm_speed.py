"""The language model's training step, flaxpp beside JAX (docs/PERFORMANCE.md, "Language
model: step time per policy").

The model of examples/lm.json: refs-format's ``LM`` (problems_lm.py) with vocabulary 64, width
64, 4 layers of 4 heads, MLP 256, ``max_len`` 64; a batch of 32 sequences of 64 random token
ids (inputs and targets); ``optax.sgd(0.01)``; the step (value_and_grad of the mean
softmax cross-entropy, ``tx.update``, ``apply_updates``) under ``jax.jit`` with the parameters
and optimiser state donated, 3 warm-up steps, then the median of ``--steps`` timed steps, each
ended by ``block_until_ready``. flaxpp's side is ``flaxpp bench --model lm``, the same model,
batch and optimiser through its train step (``train::ClassifierStep``). The two alternate
``--repeat`` times; the table gives the median (min–max) of the per-run medians, the ratio of
the medians, and each policy's step time against ``none`` (the recompute overhead).

Both sides compute in float32 (flaxpp's ``LanguageModel`` has no computation dtype yet; JAX's
products are asked for float32, not TF32, as flaxpp's are), on ``--platform`` (``cpu``, or ``cuda`` for the GPU: JAX's platform and flaxpp's device).

Run: ``python_compat/.venv/bin/python python_compat/lm_speed.py [--repeat 3] [--steps 10]
[--platform cpu|cuda] [--out TABLE.md] [build/src/flaxpp]``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import time

import sys

# JAX's platform is chosen before jax is imported: --platform is read here, the rest in main().
_platform = "cpu"
for _i, _arg in enumerate(sys.argv):
    if _arg.startswith("--platform="):
        _platform = _arg.split("=", 1)[1]
    elif _arg == "--platform" and _i + 1 < len(sys.argv):
        _platform = sys.argv[_i + 1]
os.environ["JAX_PLATFORMS"] = _platform

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import optax  # noqa: E402

from problems_lm import LM  # noqa: E402

# flaxpp's float32 products are true float32 unless TF32 is asked for; JAX's on a GPU may use
# TF32 by default: ask it for float32 too, so that both sides do the same arithmetic.
jax.config.update("jax_default_matmul_precision", "float32")

VOCAB, WIDTH, LAYERS, HEADS, MLP, SEQ, BATCH = 64, 64, 4, 4, 256, 64, 32
POLICIES = ["none", "everything_saveable", "dots_saveable", "dots_with_no_batch_dims_saveable",
            "nothing_saveable"]


def jax_step_ms(policy: str, steps: int) -> float:
    model = LM(VOCAB, WIDTH, LAYERS, HEADS, MLP, SEQ, policy)
    rng = np.random.default_rng(0)
    x = jnp.asarray(rng.integers(0, VOCAB, (BATCH, SEQ)), jnp.int32)
    y = jnp.asarray(rng.integers(0, VOCAB, (BATCH, SEQ)), jnp.int32)
    params = model.init(jax.random.PRNGKey(0), x)["params"]
    tx = optax.sgd(0.01)
    opt_state = tx.init(params)

    def step(params, opt_state, x, y):
        loss, grads = jax.value_and_grad(lambda p: optax.softmax_cross_entropy_with_integer_labels(
            model.apply({"params": p}, x), y).mean())(params)
        updates, opt_state = tx.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss

    step = jax.jit(step, donate_argnums=(0, 1))
    for _ in range(3):
        params, opt_state, loss = step(params, opt_state, x, y)
    jax.block_until_ready(loss)
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        params, opt_state, loss = step(params, opt_state, x, y)
        jax.block_until_ready((params, loss))
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


def flaxpp_step_ms(binary: str, steps: int, device: str) -> dict:
    out = subprocess.run([binary, "bench", "--model", "lm", "--steps", str(steps)], check=True,
                         capture_output=True, text=True,
                         env={**os.environ, "FLAXPP_DEVICE": device}).stdout
    return {(line := json.loads(s))["policy"]: line["step_ms"] for s in out.splitlines() if s}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("binary", nargs="?", default="build/src/flaxpp")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--platform", choices=("cpu", "cuda"), default="cpu",
                    help="where both sides compute (default cpu)")
    ap.add_argument("--out", help="also write the table to this Markdown file")
    a = ap.parse_args()
    f = {p: [] for p in POLICIES}
    j = {p: [] for p in POLICIES}
    for r in range(a.repeat):
        for p, ms in flaxpp_step_ms(a.binary, a.steps, a.platform).items():
            f[p].append(ms)
        for p in POLICIES:
            j[p].append(jax_step_ms(p, a.steps))
    med = lambda v: statistics.median(v)  # noqa: E731
    num = lambda x: f"{x:.0f}" if x >= 100 else f"{x:.3g}"  # noqa: E731  (GPU steps take ~1 ms)
    span = lambda v: f"{num(med(v))} ({num(min(v))}–{num(max(v))})"  # noqa: E731
    rows = [f"LM step on {a.platform} ({jax.devices()[0].device_kind}), batch {BATCH} x {SEQ} "
            f"tokens, float32, SGD; ms, median (min–max) of {a.repeat} runs", "",
            "| policy | flaxpp | JAX | flaxpp / JAX | flaxpp vs none | JAX vs none |",
            "| --- | --- | --- | --- | --- | --- |"]
    for p in POLICIES:
        rows.append(f"| `{p}` | {span(f[p])} | {span(j[p])} | {med(f[p]) / med(j[p]):.2f} | "
                    f"{med(f[p]) / med(f['none']):.2f} | {med(j[p]) / med(j['none']):.2f} |")
    table = "\n".join(rows) + "\n"
    print(table, end="")
    if a.out:
        with open(a.out, "w") as out:
            out.write(table)

if __name__ == "__main__":
    main()
