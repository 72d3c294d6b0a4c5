#!/usr/bin/env bash
# Benchmarks flaxpp and JAX side by side on this machine (CPU): builds flaxpp, runs
# `flaxpp bench` and python_compat/bench_jax.py over the same grid, and writes the table of
# ratios and the two plots into docs/bench/. Extra arguments (e.g. --grid large) go to both.
# Needs the python_compat venv: bash python_compat/setup_venv.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
py=python_compat/.venv/bin/python
[ -x "$py" ] || { echo "run 'bash python_compat/setup_venv.sh' first (JAX side of the benchmark)" >&2; exit 1; }
out=${FLAXPP_BUILD_DIR:-build}/bench
mkdir -p "$out" docs/bench
"${FLAXPP_BUILD_DIR:-build}/src/flaxpp" bench --out "$out/flaxpp.jsonl" "$@"
"$py" python_compat/bench_jax.py --out "$out/jax.jsonl" "$@"
"$py" python_compat/bench_compare.py "$out/flaxpp.jsonl" "$out/jax.jsonl" --out-dir docs/bench
