"""What a scan over remat'd Blocks keeps between the passes, per policy and depth: flaxpp beside
JAX (docs/PERFORMANCE.md, "Transformer stack: memory per policy").

For refs-format's ``Stack(L, num_heads=4, mlp_dim=4D, policy)`` and
``loss(p, x) = sum(Stack.apply(p, x) ** 2)`` with ``x`` f32[B, T, D]:

* JAX: the bytes ``jax._src.ad_checkpoint.saved_residuals(loss, params, x)`` lists besides
  the arguments (what ``jax.vjp`` keeps), and ``memory_analysis()`` of
  ``jax.jit(jax.value_and_grad(loss)).lower(params, x).compile()``: its temporaries (XLA may
  rematerialise or fuse further, so this is what the compiled step really holds);
* flaxpp: ``flaxpp residuals stack_loss`` with the same sizes and policy: the residual bytes
  besides the arguments, and the measured peak of value_and_grad on the CPU.

Run: ``python_compat/.venv/bin/python python_compat/stack_memory.py [build/src/flaxpp]
[--plot docs/bench/stack_memory.png]``; it prints the markdown table and, with ``--plot``,
draws the residuals per depth and policy (flaxpp solid, JAX dashed).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax._src.ad_checkpoint import saved_residuals  # noqa: E402

from problems_remat import OFFLOAD_DOTS, spec_tag  # noqa: E402
from problems_transformer import Stack  # noqa: E402

B, T, D = 8, 64, 64
POLICIES = ["none", "everything_saveable", "dots_saveable", "dots_with_no_batch_dims_saveable",
            "nothing_saveable", OFFLOAD_DOTS]
DEPTHS = [4, 8, 16]


def jax_new_residual_bytes(loss, params, x) -> int:
    """The bytes ``saved_residuals(loss, params, x)`` lists besides the arguments."""
    return sum(int(np.prod(aval.shape)) * aval.dtype.itemsize
               for aval, source in saved_residuals(loss, params, x)
               if not source.startswith("from the argument"))


def flaxpp_residuals(binary: str, function: str, sizes: dict, policy) -> tuple[int, int]:
    """``flaxpp residuals FUNCTION -N.. --policy P``: (bytes besides the arguments, measured
    peak of value_and_grad)."""
    spec = policy if isinstance(policy, str) else json.dumps(policy)
    args = [a for flag, v in sizes.items() for a in (flag, str(v))]
    out = subprocess.run([binary, "residuals", function, *args, "--policy", spec],
                         check=True, capture_output=True, text=True,
                         env={**os.environ, "FLAXPP_DEVICE": "cpu"}).stdout
    new = int(re.search(r"\((\d+) bytes besides the arguments\)", out).group(1))
    peak = int(re.search(r"measured (\d+) bytes", out).group(1))
    return new, peak


def jax_numbers(L: int, policy: str) -> tuple[int, int]:
    model = Stack(L, 4, 4 * D, policy)
    x = jax.random.normal(jax.random.PRNGKey(1), (B, T, D))
    params = model.init(jax.random.PRNGKey(0), x)["params"]

    def loss(p, x):
        return jnp.sum(model.apply({"params": p}, x) ** 2)

    compiled = jax.jit(jax.value_and_grad(loss)).lower(params, x).compile()
    return (jax_new_residual_bytes(loss, params, x),
            int(compiled.memory_analysis().temp_size_in_bytes))


def flaxpp_numbers(binary: str, L: int, policy: str) -> tuple[int, int]:
    return flaxpp_residuals(binary, "stack_loss", {"-N": B, "-T": T, "-d": D, "-L": L}, policy)


def mib(b: int) -> str:
    return f"{b / 2**20:.2f}"


def plot(path: str, rows: list[tuple[str, int, int, int]]) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(10, 4.5))
    for k, policy in enumerate(POLICIES):
        mine = [(L, f) for p, L, f, _ in rows if p == policy]
        theirs = [(L, j) for p, L, _, j in rows if p == policy]
        color = f"C{k}"
        ax.plot(*zip(*[(L, b / 2**20) for L, b in mine]), "o-", color=color,
                label=f"{spec_tag(policy)} (flaxpp)")
        ax.plot(*zip(*[(L, b / 2**20) for L, b in theirs]), "x--", color=color,
                label=f"{spec_tag(policy)} (JAX)")
    ax.set_xlabel("layers (scan over remat'd Blocks)")
    ax.set_ylabel("residuals kept for the backward pass, MiB")
    ax.set_yscale("log")
    ax.set_xticks(DEPTHS)
    ax.set_title(f"Stack(L), x f32[{B},{T},{D}]: residuals per policy")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> None:
    args = sys.argv[1:]
    plot_path = None
    if "--plot" in args:
        i = args.index("--plot")
        plot_path = args[i + 1]
        del args[i:i + 2]
    binary = args[0] if args else "build/src/flaxpp"
    print(f"Stack(L, heads 4, mlp {4 * D}), x f32[{B},{T},{D}]; MiB")
    print()
    print("| policy | L | flaxpp residuals | JAX saved_residuals | flaxpp peak (measured) | "
          "JAX compiled temporaries |")
    print("| --- | --- | --- | --- | --- | --- |")
    rows = []
    for policy in POLICIES:
        for L in DEPTHS:
            fr, fp = flaxpp_numbers(binary, L, policy)
            jr, jt = jax_numbers(L, policy)
            rows.append((policy, L, fr, jr))
            print(f"| `{spec_tag(policy)}` | {L} | {mib(fr)} | {mib(jr)} | {mib(fp)} | {mib(jt)} |")
    if plot_path:
        plot(plot_path, rows)


if __name__ == "__main__":
    main()
