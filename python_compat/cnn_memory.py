"""What the contract's CNN keeps between the passes, per remat policy: flaxpp beside JAX
(docs/PERFORMANCE.md, "CNN: memory per policy").

For refs-format's ``CNN(features=(d,) * L, classes=10, policy)`` (ConvBlocks of a 3x3 "SAME"
convolution, relu and a 2x2 average pool, each ``nn.remat(ConvBlock, policy,
prevent_cse=False)``; the mean over the image; a Dense head) and
``loss(p, x) = sum(CNN.apply(p, x) ** 2)`` with ``x`` f32[N, T, T, 3]:

* JAX: the bytes ``jax._src.ad_checkpoint.saved_residuals(loss, params, x)`` lists besides the
  arguments (what ``jax.vjp`` keeps), and their count by kind;
* flaxpp: ``flaxpp residuals cnn_loss`` with the same sizes and policy: the residual bytes
  besides the arguments, and the measured peak of value_and_grad on the CPU.

Run: ``python_compat/.venv/bin/python python_compat/cnn_memory.py [build/src/flaxpp]``; it
prints the markdown table.
"""

from __future__ import annotations

import os
import sys

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

from problems_cnn import CNN  # noqa: E402
from stack_memory import flaxpp_residuals, jax_new_residual_bytes  # noqa: E402

N, T, D, L = 8, 32, 16, 4
POLICIES = ["none", "everything_saveable", "dots_saveable", "dots_with_no_batch_dims_saveable",
            "nothing_saveable"]


def jax_bytes(policy: str) -> int:
    model = CNN((D,) * L, 10, policy)
    x = jax.random.normal(jax.random.PRNGKey(1), (N, T, T, 3))
    params = model.init(jax.random.PRNGKey(0), x)["params"]

    def loss(p, v):
        return jnp.sum(model.apply({"params": p}, v) ** 2)

    return jax_new_residual_bytes(loss, params, x)


def flaxpp_bytes(binary: str, policy: str) -> tuple[int, int]:
    return flaxpp_residuals(binary, "cnn_loss", {"-N": N, "-T": T, "-d": D, "-L": L}, policy)


def main() -> None:
    binary = sys.argv[1] if len(sys.argv) > 1 else "build/src/flaxpp"
    print(f"CNN(({D},) * {L}, 10 classes), x f32[{N},{T},{T},3]; bytes besides the arguments")
    print()
    print("| policy | flaxpp residuals | JAX saved_residuals | equal | flaxpp peak (measured) |")
    print("| --- | --- | --- | --- | --- |")
    for policy in POLICIES:
        fr, fp = flaxpp_bytes(binary, policy)
        jr = jax_bytes(policy)
        print(f"| `{policy}` | {fr:,} | {jr:,} | {'yes' if fr == jr else 'no'} | {fp:,} |")


if __name__ == "__main__":
    main()
