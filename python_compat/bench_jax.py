"""JAX side of the flaxpp-vs-JAX training-step benchmark (`flaxpp bench`).

Times one jitted SGD training step of an MLP classifier per configuration and writes one
JSON object per line, with exactly the keys `flaxpp bench` writes:

    framework, backend, width, depth, batch, dtype, policy, steps, step_ms, samples_per_s,
    gflops, peak_bytes, residual_bytes, gemm_floor_ms, step_over_floor

Model and step (per configuration width W, depth L, batch B, policy P):

* ``MLP(features=[W]*(L-1) + [10], dtype=--dtype)`` -- L Dense layers, relu between them, input x f32[B, W]
  (standard normal) and labels int32[B] in [0, 10), both from ``numpy.random.default_rng(0)``;
  parameters from ``init(jax.random.PRNGKey(0), x)``.
* ``nn.remat(MLP, policy=jax.checkpoint_policies.<P>)`` unless P is ``none``.
* loss = ``optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()``;
  ``tx = optax.sgd(0.01)``; step = value_and_grad, ``tx.update``, ``optax.apply_updates``,
  under ``jax.jit`` with the parameters and optimiser state donated (``donate_argnums=(0, 1)``),
  as flaxpp's train step donates them.

Measurements:

* The step is compiled once (``jax.jit(step).lower(...).compile()``); then 3 warm-up steps and
  ``--steps`` (default 20) timed steps, each ended by ``jax.block_until_ready``; the new params
  and optimiser state feed the next step. ``step_ms`` is the median.
* ``gflops`` counts ``6 * B * sum(in * out)`` FLOPs per step (2 forward, 4 backward per
  matmul multiply-add; bias, relu, softmax and the update are not counted).
* ``peak_bytes`` on CPU = ``argument + temp + output - alias`` bytes of the compiled step's
  ``memory_analysis()`` (XLA's buffer assignment: the inputs params, opt_state, x, y, the
  temporaries, and the outputs that do not reuse a donated input: with donation, arguments plus
  temporaries and the loss; generated code is not counted). On a GPU, the rise of the
  device's ``peak_bytes_in_use`` above the bytes in use before the configuration started.
  That high-water mark never resets within a process, so the configurations run in one process
  in increasing order of their expected memory, and one whose run did not raise the mark (its
  peak is hidden under an earlier one's) runs again in a process of its own (``--only``).
* ``residual_bytes`` = sum of the bytes of the residuals
  ``jax._src.ad_checkpoint.saved_residuals(lambda p, x: loss(p, x, y), params, x)`` reports,
  leaving out those that are the arguments themselves (description "from the argument ...").
* ``gemm_floor_ms`` and ``step_over_floor`` are null (flaxpp-only).

Usage (from the repository root)::

    python_compat/.venv/bin/python python_compat/bench_jax.py [--grid default|large]
        [--steps 20] [--warmup 3] [--platform cpu|cuda] [--out FILE.jsonl]

Progress goes to stderr, JSON lines to ``--out`` (default stdout).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import sys
import time


POLICIES = ("none", "dots_with_no_batch_dims_saveable", "nothing_saveable")
NUM_CLASSES = 10


def grid(name: str):
    """(width, depth, batch, policy) tuples of a grid."""
    if name == "default":
        widths, batches = [64, 256, 512, 1024], [128]
    elif name == "large":
        widths, batches = [64, 256, 512, 1024, 2048, 4096], [128, 512]
    else:
        raise ValueError(f"unknown grid {name!r}")
    return [(w, 4, b, p) for b in batches for w in widths for p in POLICIES]


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--grid", choices=("default", "large"), default="default")
    ap.add_argument("--steps", type=int, default=20, help="timed steps (default 20)")
    ap.add_argument("--warmup", type=int, default=3, help="warm-up steps (default 3)")
    ap.add_argument("--platform", default="cpu",
                    help="JAX_PLATFORMS value (default cpu; e.g. gpu / cuda)")
    ap.add_argument("--out", default="-", help="JSON-lines output file (default stdout)")
    ap.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32",
                    help="the MLP's computation dtype (parameters stay float32)")
    ap.add_argument("--only", default=None, metavar="W,L,B,POLICY",
                    help="run this one configuration (used per process on GPUs)")
    return ap.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    # Must be set before jax is imported. Without preallocation (JAX takes 75% of a GPU
    # otherwise), a configuration run again in a process of its own finds the memory it needs.
    os.environ["JAX_PLATFORMS"] = args.platform
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

    import jax
    import jax.numpy as jnp
    import numpy as np
    import optax
    from flax import linen as nn
    from jax._src.ad_checkpoint import saved_residuals
    # The reference cases' MLP (Dense, relu between layers), so both sides time one model.
    from problems_nn import MLP

    backend = {"gpu": "cuda"}.get(jax.default_backend(), jax.default_backend())
    print(f"bench_jax: jax {jax.__version__}, backend {backend}, devices {jax.devices()}",
          file=sys.stderr)

    out = sys.stdout if args.out == "-" else open(args.out, "w")
    t_all = time.perf_counter()
    if args.only:
        w, d, b, pol = args.only.split(",")
        configs = [(int(w), int(d), int(b), pol)]
    else:
        configs = grid(args.grid)
    on_device = backend != "cpu"

    def memory():
        return jax.devices()[0].memory_stats()

    def measure(width, depth, batch, policy):
        features = tuple([width] * (depth - 1) + [NUM_CLASSES])
        cls = MLP if policy == "none" else nn.remat(
            MLP, policy=getattr(jax.checkpoint_policies, policy))
        model = cls(features, dtype=jnp.dtype(args.dtype))

        rng = np.random.default_rng(0)
        x = jnp.asarray(rng.standard_normal((batch, width), dtype=np.float32))
        y = jnp.asarray(rng.integers(0, NUM_CLASSES, size=batch).astype(np.int32))
        params = model.init(jax.random.PRNGKey(0), x)["params"]
        tx = optax.sgd(0.01)
        opt_state = tx.init(params)

        def loss_fn(p, xb, yb):
            logits = model.apply({"params": p}, xb)
            return optax.softmax_cross_entropy_with_integer_labels(logits, yb).mean()

        def step(p, s, xb, yb):
            loss, grads = jax.value_and_grad(loss_fn)(p, xb, yb)
            updates, s = tx.update(grads, s, p)
            return optax.apply_updates(p, updates), s, loss

        t0 = time.perf_counter()
        compiled = jax.jit(step, donate_argnums=(0, 1)).lower(params, opt_state, x, y).compile()
        compile_s = time.perf_counter() - t0
        mem = compiled.memory_analysis()
        peak_bytes = int(mem.argument_size_in_bytes + mem.temp_size_in_bytes +
                         mem.output_size_in_bytes - mem.alias_size_in_bytes)

        res = saved_residuals(lambda p, xb: loss_fn(p, xb, y), params, x)
        residual_bytes = int(sum(
            int(np.prod(aval.shape)) * aval.dtype.itemsize
            for aval, desc in res if not desc.startswith("from the argument")))

        p, s = params, opt_state  # donated by the first step: not used again
        for _ in range(args.warmup):
            p, s, loss = jax.block_until_ready(compiled(p, s, x, y))
        times = []
        for _ in range(args.steps):
            t0 = time.perf_counter()
            p, s, loss = jax.block_until_ready(compiled(p, s, x, y))
            times.append(time.perf_counter() - t0)
        med = statistics.median(times)

        flops = 6 * batch * sum(i * o for i, o in zip((width,) + features[:-1], features))
        print(f"  W={width:5d} L={depth} B={batch:4d} {policy:33s} "
              f"{med * 1e3:9.3f} ms  {flops / med / 1e9:7.2f} GFLOP/s  "
              f"XLA's buffers {peak_bytes / 2**20:8.2f} MiB (arg {mem.argument_size_in_bytes}, "
              f"temp {mem.temp_size_in_bytes}, out {mem.output_size_in_bytes}, "
              f"alias {mem.alias_size_in_bytes})  "
              f"residuals {residual_bytes / 2**20:.2f} MiB  compile {compile_s:.2f} s  "
              f"loss {float(loss):.4f}", file=sys.stderr)
        return {
            "framework": "jax", "backend": backend, "width": width, "depth": depth,
            "batch": batch, "dtype": args.dtype, "policy": policy, "steps": args.steps,
            "step_ms": med * 1e3, "samples_per_s": batch / med,
            "gflops": flops / med / 1e9, "peak_bytes": peak_bytes,
            "residual_bytes": residual_bytes, "gemm_floor_ms": None,
            "step_over_floor": None,
        }

    def expected_memory(config):
        width, depth, batch, policy = config
        return (width * width + batch * width) * depth * (1 + POLICIES[::-1].index(policy))

    try:
        if on_device:
            configs = sorted(configs, key=expected_memory)
        for config in configs:
            if on_device:
                gc.collect()
                in_use, mark = memory()["bytes_in_use"], memory()["peak_bytes_in_use"]
            row = measure(*config)
            if on_device:
                gc.collect()
                peak = memory()["peak_bytes_in_use"]
                if peak > mark or args.only:
                    row["peak_bytes"] = int(peak - in_use)
                else:  # hidden under an earlier configuration's peak: measure it alone
                    print("  (again in a process of its own, for its peak)", file=sys.stderr)
                    import subprocess
                    line = subprocess.run(
                        [sys.executable, __file__, "--platform", args.platform, "--steps",
                         str(args.steps), "--warmup", str(args.warmup), "--dtype", args.dtype,
                         "--only", ",".join(map(str, config))],
                        check=True, stdout=subprocess.PIPE, text=True).stdout
                    row = json.loads(line)
            out.write(json.dumps(row) + "\n")
            out.flush()
    finally:
        if out is not sys.stdout:
            out.close()
    print(f"bench_jax: done in {time.perf_counter() - t_all:.1f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
