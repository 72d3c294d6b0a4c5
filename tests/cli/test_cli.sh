#!/usr/bin/env bash
# The flaxpp command line as a user meets it: exit codes, summary lines and error messages of
# `flaxpp check`, `residuals`, `train` and `bench`, and of a BLAS that cannot be loaded.
# Usage: test_cli.sh path/to/flaxpp
set -u
flaxpp=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
passed=0 failed=0

expect() {  # expect NAME EXIT_CODE PATTERN -- command...
  local name=$1 code=$2 pattern=$3
  shift 4
  local out rc
  out=$("$@" 2>&1)
  rc=$?
  if [ "$rc" -eq "$code" ] && grep -qE -- "$pattern" <<<"$out"; then
    passed=$((passed + 1))
  else
    failed=$((failed + 1))
    printf 'FAIL %s: exit %s (want %s), output:\n%s\n' "$name" "$rc" "$code" "$out"
  fi
}

good='{"id": "k0", "problem": "random.key", "inputs": {"seed": 0}, "expected": {"dtype": "uint32", "shape": [2], "data": [0, 0]}}'
bad='{"id": "k1", "problem": "random.key", "inputs": {"seed": 1}, "expected": {"dtype": "uint32", "shape": [2], "data": [0, 2]}}'
printf '{"format": "flaxpp.refs/1", "cases": [%s]}' "$good" >"$dir/good.json"
printf '{"format": "flaxpp.refs/1", "cases": [%s, %s]}' "$good" "$bad" >"$dir/mixed.json"
printf '{"format": "flaxpp.refs/1", "cases": [%s' "$good" >"$dir/truncated.json"
printf '{"format": "flaxpp.refs/2", "cases": []}' >"$dir/other_format.json"
printf '{"format": "flaxpp.refs/1", "cases": [{"id": "n", "problem": "random.uniform", "inputs": {"key": {"dtype": "uint32", "shape": [2], "data": [0, 0]}, "shape": [1], "maxval": 1e400}, "expected": 0}]}' >"$dir/huge_number.json"

expect "all pass" 0 '^1 passed, 0 failed$' -- "$flaxpp" check "$dir/good.json"
expect "a failing case" 1 '^1 passed, 1 failed$' -- "$flaxpp" check "$dir/mixed.json"
expect "the failing case is named" 1 'FAIL  k1' -- "$flaxpp" check "$dir/mixed.json"
expect "verbose lists passes" 1 '^ok    k0$' -- "$flaxpp" check --verbose "$dir/mixed.json"
expect "truncated JSON" 2 'truncated.json:1:[0-9]+: not valid JSON' -- "$flaxpp" check "$dir/truncated.json" "$dir/good.json"
expect "other files still run" 2 '^1 passed, 0 failed$' -- "$flaxpp" check "$dir/truncated.json" "$dir/good.json"
expect "another format" 2 '\$\.format: expected "flaxpp.refs/1"' -- "$flaxpp" check "$dir/other_format.json"
expect "a number beyond double range" 2 'not valid JSON' -- "$flaxpp" check "$dir/huge_number.json"
expect "a missing file" 2 'cannot open' -- "$flaxpp" check "$dir/nope.json"
expect "no files" 2 'no reference files given' -- "$flaxpp" check
expect "unknown option" 2 'unknown option --fast' -- "$flaxpp" check --fast "$dir/good.json"
expect "bad device" 2 'unknown device "tpu"' -- "$flaxpp" check --device tpu "$dir/good.json"
expect "unknown command" 2 'unknown command "chek"' -- "$flaxpp" chek
expect "residuals" 0 'f32\[5,4\] output of dot_general' -- "$flaxpp" residuals checkpoint_dot_policy --policy dots_saveable
expect "residuals, named" 0 "named 'a'" -- "$flaxpp" residuals named_dot_policy --policy '{"name": "save_only_these_names", "names": ["a"]}'
expect "residuals, bad policy" 2 'unknown checkpoint policy' -- "$flaxpp" residuals checkpoint_dot_policy --policy dots_savable
expect "a library that is no BLAS" 2 'libm.so.6 has no cblas_[sd]gemm .*unset it' -- env FLAXPP_BLAS=libm.so.6 "$flaxpp" bench --steps 1 --width 64 --device cpu --out "$dir/no_blas.jsonl"
expect "a BLAS that does not load" 2 'cannot load the BLAS library /nonexistent/libblas.so .*FLAXPP_BLAS' -- env FLAXPP_BLAS=/nonexistent/libblas.so "$flaxpp" bench --steps 1 --width 64 --device cpu --out "$dir/no_blas.jsonl"

# flaxpp check against cases that blow up (issue 15): sizes beyond the host memory are refused
# up front (the limit makes it independent of the machine), a runaway case stops at its time
# limit, and one stuck in a single computation ends the run at twice the limit.
key='{"dtype": "uint32", "shape": [2], "data": [0, 0]}'
f32_1='{"dtype": "float32", "shape": [1], "data": [0]}'
printf '{"format": "flaxpp.refs/1", "cases": [{"id": "s", "problem": "random.split", "inputs": {"key": %s, "num": 1000000000}, "expected": %s}, %s]}' "$key" "$f32_1" "$good" >"$dir/split.json"
printf '{"format": "flaxpp.refs/1", "cases": [{"id": "stuck", "problem": "random.normal", "inputs": {"key": %s, "shape": [134217728]}, "expected": %s}, %s]}' "$key" "$f32_1" "$good" >"$dir/stuck.json"
printf '{"format": "flaxpp.refs/1", "cases": [{"id": "runaway", "problem": "train_mlp", "inputs": {"seed": 0, "x": {"dtype": "float32", "shape": [2, 1], "data": [0, 1]}, "y": {"dtype": "int32", "shape": [2], "data": [0, 1]}, "features": [2], "optimizer": {"name": "sgd", "learning_rate": 0.1}, "policy": "none", "steps": 100000000, "batch_size": 2}, "expected": %s}]}' "$f32_1" >"$dir/runaway.json"
expect "memory refused" 1 'inputs.num: splitting a key into 1000000000 keys needs 28.0 GB of host memory, but 1.00 GB are available' -- env FLAXPP_HOST_MEMORY_LIMIT=1000000000 "$flaxpp" check "$dir/split.json"
expect "the run goes on" 1 '^1 passed, 1 failed$' -- env FLAXPP_HOST_MEMORY_LIMIT=1000000000 "$flaxpp" check "$dir/split.json"
expect "time limit" 1 'stopped after the time limit of 1 s per case' -- "$flaxpp" check --case-timeout 1 "$dir/runaway.json"
expect "stuck case" 1 'still running 2 s after it started, twice its time limit of 1 s' -- "$flaxpp" check --case-timeout=1 "$dir/stuck.json"
expect "stuck case stops the run" 1 '^0 passed, 1 failed$' -- "$flaxpp" check --case-timeout=1 "$dir/stuck.json"
expect "bad time limit" 2 'case-timeout takes a whole number of seconds from 0' -- "$flaxpp" check --case-timeout -1 "$dir/good.json"

# flaxpp train: a small synthetic data set (3 separable classes), an uninterrupted run, and a
# run stopped after 7 steps then resumed; both must end with the same checkpoint, byte for byte.
python_free_csv() {
  echo "a,b,label"
  for i in $(seq 0 59); do echo "$((i % 3 * 5 + i % 2)),$((i % 3 * 3 - i % 4)),$((i % 3))"; done
}
python_free_csv >"$dir/toy.csv"
train_config() {  # train_config OUTPUT_DIR
  printf '{"data": {"path": "%s", "label_column": "label", "test_fraction": 0.25}, "model": {"features": [8, 3], "policy": "nothing_saveable"}, "optimizer": {"name": "adam", "learning_rate": 0.01}, "epochs": 3, "batch_size": 8, "seed": 5, "output_dir": "%s"}' "$dir/toy.csv" "$1"
}
train_config "$dir/full" >"$dir/full.json"
train_config "$dir/resumed" >"$dir/resumed.json"
expect "train to the end" 0 '^test accuracy: [01]\.[0-9]{4}$' -- "$flaxpp" train "$dir/full.json"
expect "train stops with a checkpoint" 0 'stopped at step 7: checkpoint saved' -- "$flaxpp" train "$dir/resumed.json" --max-steps 7
expect "train resumes" 0 'resuming from .* at step 7' -- "$flaxpp" train "$dir/resumed.json"
if cmp -s "$dir/full/checkpoint.json" "$dir/resumed/checkpoint.json"; then
  passed=$((passed + 1))
else
  failed=$((failed + 1))
  echo "FAIL resumed training: its final checkpoint differs from the uninterrupted run's"
fi
# A run killed at an arbitrary moment (SIGKILL: no chance to save) resumes from its last
# atomic epoch checkpoint and still ends exactly where the uninterrupted run ends.
train_config "$dir/killed" | sed 's/"epochs": 3/"epochs": 60/' >"$dir/killed.json"
train_config "$dir/long" | sed 's/"epochs": 3/"epochs": 60/' >"$dir/long.json"
"$flaxpp" train "$dir/long.json" >/dev/null 2>&1
"$flaxpp" train "$dir/killed.json" >/dev/null 2>&1 &
sleep 0.3
kill -9 $! 2>/dev/null
wait $! 2>/dev/null
expect "train resumes after kill -9" 0 '^test accuracy: ' -- "$flaxpp" train "$dir/killed.json"
if cmp -s "$dir/long/checkpoint.json" "$dir/killed/checkpoint.json"; then
  passed=$((passed + 1))
else
  failed=$((failed + 1))
  echo "FAIL training killed and resumed: its final checkpoint differs from the uninterrupted run's"
fi
for f in metrics.csv curves.png; do
  if [ -s "$dir/full/$f" ]; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAIL train wrote no $f"; fi
done
printf '{"data": {"path": "%s"}, "model": {"features": [3]}, "optimizer": {"name": "sgd", "learning_rate": 0.1}, "epochs": 1, "learning_rate": 3}' "$dir/toy.csv" >"$dir/bad.json"
expect "a malformed config names the key" 2 '\$\.learning_rate: unknown key; accepted keys:' -- "$flaxpp" train "$dir/bad.json"

# flaxpp bench: one timed step per configuration; 12 JSON lines with the schema bench_jax.py shares.
expect "bench runs the default grid" 0 '' -- "$flaxpp" bench --steps 1 --out "$dir/bench.jsonl"
if [ "$(grep -c '"framework":"flaxpp"' "$dir/bench.jsonl")" -eq 12 ] &&
   [ "$(grep -c '"gemm_floor_ms"' "$dir/bench.jsonl")" -eq 12 ]; then
  passed=$((passed + 1))
else
  failed=$((failed + 1))
  echo "FAIL bench: expected 12 JSON lines with the shared keys"
fi

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
