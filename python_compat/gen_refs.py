"""Generate flaxpp reference-case files by running real JAX/Flax/optax.

Usage (from the repository root):

    python_compat/.venv/bin/python python_compat/gen_refs.py [--out tests/refs] [--only NAME ...]

``--only`` takes target names (e.g. ``random_legacy``) or family names (``random`` selects
every target of that family: random.json and random_legacy.json); it may be repeated or
given a comma-separated list.  Without it every target is generated.

To add a problem family: write ``python_compat/problems_<family>.py`` with a function
returning a list of cases (built with ``refs_writer.make_case``) and add a ``Target`` to
``TARGETS`` below.

The reference values come from JAX on CPU with JAX's default configuration (x64 off,
default PRNG threefry2x32); only ``jax_threefry_partitionable`` is set per target.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from collections import Counter
from typing import Callable

# Reference values are defined as JAX-on-CPU results; never pick up an accelerator.
os.environ["JAX_PLATFORMS"] = "cpu"

HERE = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(HERE)
if HERE not in sys.path:
    sys.path.insert(0, HERE)

import jax  # noqa: E402
import flax  # noqa: E402
import optax  # noqa: E402

import problems_cnn  # noqa: E402
import problems_control_flow  # noqa: E402
import problems_jnp  # noqa: E402
import problems_lm  # noqa: E402
import problems_nn  # noqa: E402
import problems_random  # noqa: E402
import problems_remat  # noqa: E402
import problems_train  # noqa: E402
import problems_transformer  # noqa: E402
import problems_vmap  # noqa: E402
import refs_writer  # noqa: E402


@dataclasses.dataclass(frozen=True)
class Target:
    name: str  # target name, usable with --only
    family: str  # family name, usable with --only (selects all its targets)
    filename: str  # output file name inside --out
    partitionable: bool  # value of jax_threefry_partitionable while generating
    generate: Callable[[], list]  # returns the list of cases
    max_bytes: int  # size budget of the written file
    skipped: Callable[[], list] | None = None  # notes about inputs JAX rejected


TARGETS: list[Target] = [
    Target("random", "random", "random.json", True, problems_random.cases, 4_000_000,
           lambda: problems_random.SKIPPED),
    Target("random_legacy", "random", "random_legacy.json", False, problems_random.legacy_cases,
           1_000_000, lambda: problems_random.SKIPPED),
    # No randomness in the remat problems; generated in JAX's default (partitionable) mode.
    Target("remat", "remat", "remat.json", True, problems_remat.cases, 4_000_000,
           lambda: problems_remat.SKIPPED),
    # Module problems (linen/NNX init, grads, remat, LayerNorm, Dropout); JAX's default mode.
    Target("nn", "nn", "nn.json", True, problems_nn.cases, 4_000_000,
           lambda: problems_nn.SKIPPED),
    # Training trajectories (train_mlp: linen MLP + optax); JAX's default mode.
    Target("train", "train", "train.json", True, problems_train.cases, 3_000_000,
           lambda: problems_train.SKIPPED),
    # Transformer problems (Embed, attention, the Block's gradients and saved residuals);
    # JAX's default mode.
    Target("transformer", "transformer", "transformer.json", True, problems_transformer.cases,
           1_000_000, lambda: problems_transformer.SKIPPED),
    # Language-model trajectories (lm_train: the LM of scan(remat(Block)) + optax).
    Target("lm", "transformer", "lm.json", True, problems_lm.cases, 1_000_000,
           lambda: problems_lm.SKIPPED),
    # Control flow (cond, switch, fori_loop: values, gradients, saved residuals per policy).
    Target("control_flow", "control_flow", "control_flow.json", True, problems_control_flow.cases,
           1_000_000, lambda: problems_control_flow.SKIPPED),
    # The jnp/lax surface (array_op: values and cotangents; random.categorical).
    Target("jnp", "jnp", "jnp.json", True, problems_jnp.cases, 1_000_000,
           lambda: problems_jnp.SKIPPED),
    # Batching (ensemble: Flax's nn.vmap; per_example_grads: jax.vmap of jax.grad).
    Target("vmap", "vmap", "vmap.json", True, problems_vmap.cases, 1_000_000,
           lambda: problems_vmap.SKIPPED),
    # Convolutions and pooling (Flax's nn.Conv, max_pool, avg_pool: values and gradients).
    Target("cnn", "cnn", "cnn.json", True, problems_cnn.cases, 2_000_000,
           lambda: problems_cnn.SKIPPED),
]

# split(key(0), 4) in each threefry mode (docs/jax-flax-semantics.md §1.6): a self-test
# that the mode switch really took effect.
_SPLIT_CHECK = {
    True: [[1797259609, 2579123966], [928981903, 3453687069], [4146024105, 2718843009],
           [2467461003, 3840466878]],
    False: [[2285895361, 1501764800], [1518642379, 4090693311], [433833334, 4221794875],
            [839183663, 3740430601]],
}


def _configure_defaults() -> None:
    """Pin the JAX configuration the refs format assumes, whatever the environment says."""
    jax.config.update("jax_enable_x64", False)
    jax.config.update("jax_default_prng_impl", "threefry2x32")
    jax.config.update("jax_threefry_partitionable", True)
    assert jax.default_backend() == "cpu", jax.default_backend()


def _set_partitionable(value: bool) -> None:
    jax.config.update("jax_threefry_partitionable", value)
    assert bool(jax.config.jax_threefry_partitionable) is value
    got = jax.random.key_data(jax.random.split(jax.random.key(0), 4)).tolist()
    assert got == _SPLIT_CHECK[value], f"threefry mode switch failed: {got}"


def versions(partitionable: bool) -> dict:
    return {
        "jax": jax.__version__,
        "flax": flax.__version__,
        "optax": optax.__version__,
        "jax_threefry_partitionable": partitionable,
    }


def select(only: list[str] | None) -> list[Target]:
    if not only:
        return list(TARGETS)
    names = [n.strip() for item in only for n in item.split(",") if n.strip()]
    known = {t.name for t in TARGETS} | {t.family for t in TARGETS}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise SystemExit(f"unknown target/family {unknown}; known: {sorted(known)}")
    return [t for t in TARGETS if t.name in names or t.family in names]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=os.path.join(REPO_ROOT, "tests", "refs"),
                    help="output directory (default: <repo>/tests/refs)")
    ap.add_argument("--only", action="append", metavar="NAME",
                    help="target or family name(s) to generate; repeatable / comma-separated")
    args = ap.parse_args(argv)

    _configure_defaults()
    targets = select(args.only)
    ok = True
    for t in targets:
        _set_partitionable(t.partitionable)
        try:
            cases = t.generate()
            skipped = list(t.skipped()) if t.skipped else []
        finally:
            _set_partitionable(True)
        path = os.path.join(args.out, t.filename)
        size = refs_writer.write_refs(path, cases, versions(t.partitionable))
        per_problem = Counter(c["problem"] for c in cases)
        print(f"{path}: {len(cases)} cases, {size} bytes "
              f"(jax_threefry_partitionable={t.partitionable})")
        for problem, n in per_problem.items():
            print(f"    {problem}: {n}")
        for note in skipped:
            print(f"    skipped (JAX rejected): {note}")
        if size > t.max_bytes:
            print(f"ERROR: {path} is {size} bytes, over its budget of {t.max_bytes}", file=sys.stderr)
            ok = False
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
