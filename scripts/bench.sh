#!/usr/bin/env bash
# Benchmarks flaxpp and JAX side by side on this machine: builds flaxpp, runs `flaxpp bench`
# and python_compat/bench_jax.py over the same grid, and writes the table of ratios and the
# two plots into docs/bench/ (docs/bench/gpu/ with --gpu: both sides on the first GPU, in bf16).
# --repeat N runs both sides N times, alternating, and reports medians over the runs;
# --no-build uses the build as it is. Other arguments (e.g. --grid large) go to both. Needs the JAX side: the python_compat venv
# (bash python_compat/setup_venv.sh), or FLAXPP_BENCH_PYTHON naming a python with JAX.
set -euo pipefail
cd "$(dirname "$0")/.."
[[ " $* " == *" --no-build "* ]] || bash scripts/build.sh
py=${FLAXPP_BENCH_PYTHON:-python_compat/.venv/bin/python}
[ -x "$py" ] || command -v "$py" >/dev/null || { echo "run 'bash python_compat/setup_venv.sh' first (JAX side of the benchmark)" >&2; exit 1; }
flaxpp_args=(--device cpu) jax_args=(--platform cpu) docs=docs/bench
args=() repeat=1 want_repeat=0
for a in "$@"; do
  if [ "$want_repeat" = 1 ]; then
    repeat=$a want_repeat=0
  elif [ "$a" = --repeat ]; then
    want_repeat=1
  elif [ "$a" = --no-build ]; then
    :
  elif [ "$a" = --gpu ]; then
    # The GPU grid computes in bf16 (parameters in float32), as the GPU benchmark asks.
    flaxpp_args=(--device cuda --dtype bfloat16) jax_args=(--platform cuda --dtype bfloat16)
    docs=docs/bench/gpu
  else
    args+=("$a")
  fi
done
out=${FLAXPP_BUILD_DIR:-build}/bench
mkdir -p "$out" "$docs"
: >"$out/flaxpp.jsonl"
: >"$out/jax.jsonl"
# With --repeat N the two sides take turns N times (so that the machine's drifts hit both),
# and the table reports each configuration's median over the runs.
for ((run = 1; run <= repeat; run++)); do
  [ "$repeat" -gt 1 ] && echo "bench.sh: run $run of $repeat" >&2
  "${FLAXPP_BUILD_DIR:-build}/src/flaxpp" bench "${flaxpp_args[@]}" --out "$out/run.jsonl" "${args[@]}"
  cat "$out/run.jsonl" >>"$out/flaxpp.jsonl"
  "$py" python_compat/bench_jax.py "${jax_args[@]}" --out "$out/run.jsonl" "${args[@]}"
  cat "$out/run.jsonl" >>"$out/jax.jsonl"
done
"$py" python_compat/bench_compare.py "$out/flaxpp.jsonl" "$out/jax.jsonl" --out-dir "$docs"
