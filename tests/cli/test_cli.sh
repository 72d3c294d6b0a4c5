#!/usr/bin/env bash
# The flaxpp command line as a user meets it: exit codes, summary lines and error messages of
# `flaxpp check`, `residuals`, `train`, `generate` and `bench`, and of a BLAS that cannot be
# loaded.
# Usage: test_cli.sh path/to/flaxpp
set -u
flaxpp=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
source "$(dirname "$0")/../harness/checks.sh"

expect() {  # expect NAME EXIT_CODE PATTERN -- command...
  local name=$1 code=$2 pattern=$3
  shift 4
  local out rc
  out=$("$@" 2>&1)
  rc=$?
  [ "$rc" -ne 0 ] && printf '%s\n' "$out" >>"$dir/errors.log"
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
expect "residuals of the CNN: dots_saveable keeps each convolution's output" 0 'f32\[2,4,4,3\] output of conv_general_dilated' -- "$flaxpp" residuals cnn_loss -N 2 -d 3 -T 4 -L 2 --policy dots_saveable
expect "residuals of a scan over remat'd Blocks: one carry per layer" 0 'f32\[3,2,4,8\] output of scan +768 bytes' -- "$flaxpp" residuals stack_loss -N 2 -d 8 -T 4 -L 3 --policy nothing_saveable
expect "residuals --budget: the planned peak is the measured one, within the budget" 0 'peak: planned ([0-9]+) bytes, measured \1 bytes, budget 1300000 bytes' -- "$flaxpp" residuals stack_loss -N 8 -d 32 -T 16 -L 4 --budget 1300000
expect "residuals --budget: a roomy budget keeps everything" 0 'region 0: everything_saveable \(declared: nothing_saveable\)' -- "$flaxpp" residuals stack_loss -N 8 -d 32 -T 16 -L 4 --budget 1GiB
expect "residuals --budget: what a region keeps" 0 '^    keeps 15 values besides its inputs, 483328 bytes per run' -- "$flaxpp" residuals stack_loss -N 8 -d 32 -T 16 -L 4 --budget 1GiB
expect "residuals --budget: each kept value with its cost" 0 '^      layer_norm f32\[8,16,32\]: 16384 bytes, 4096 FLOPs$' -- "$flaxpp" residuals stack_loss -N 8 -d 32 -T 16 -L 4 --budget 1GiB
expect "residuals --budget: too small names the least peak" 2 'no remat choice fits the memory budget of 1000 bytes: the least planned peak is [0-9]+ bytes' -- "$flaxpp" residuals stack_loss -N 8 -d 32 -T 16 -L 4 --budget 1kB
expect "residuals --budget: a bad size" 2 '--budget: expected a positive number of bytes such as 48MiB' -- "$flaxpp" residuals stack_loss --budget 12mb
expect "residuals, bad policy" 2 'unknown checkpoint policy' -- "$flaxpp" residuals checkpoint_dot_policy --policy dots_savable
expect "a library that is no BLAS" 2 'libm.so.6 has no cblas_[sd]gemm .*unset it' -- env FLAXPP_CPU_GEMM=blas FLAXPP_BLAS=libm.so.6 "$flaxpp" bench --steps 1 --width 64 --device cpu --out "$dir/no_blas.jsonl"
expect "a BLAS that does not load" 2 'cannot load the BLAS library /nonexistent/libblas.so .*FLAXPP_BLAS' -- env FLAXPP_CPU_GEMM=blas FLAXPP_BLAS=/nonexistent/libblas.so "$flaxpp" bench --steps 1 --width 64 --device cpu --out "$dir/no_blas.jsonl"
expect "an unknown product engine" 2 "FLAXPP_CPU_GEMM is 'mkl'; expected 'onednn' or 'blas'" -- env FLAXPP_CPU_GEMM=mkl "$flaxpp" bench --steps 1 --width 64 --device cpu --out "$dir/no_blas.jsonl"
expect "a thread count that is no number" 2 "FLAXPP_NUM_THREADS is '2x'; expected a positive number" -- env FLAXPP_NUM_THREADS=2x "$flaxpp" bench --steps 1 --width 64 --device cpu --out "$dir/no_blas.jsonl"

# flaxpp check against cases that blow up (issue 15): sizes beyond the host memory are refused
# up front (the limit makes it independent of the machine), a runaway case stops at its time
# limit, and one stuck in a single computation ends the run at twice the limit.
key='{"dtype": "uint32", "shape": [2], "data": [0, 0]}'
f32_1='{"dtype": "float32", "shape": [1], "data": [0]}'
printf '{"format": "flaxpp.refs/1", "cases": [{"id": "s", "problem": "random.split", "inputs": {"key": %s, "num": 1000000000}, "expected": %s}, %s]}' "$key" "$f32_1" "$good" >"$dir/split.json"
printf '{"format": "flaxpp.refs/1", "cases": [{"id": "stuck", "problem": "random.normal", "inputs": {"key": %s, "shape": [134217728]}, "expected": %s}, %s]}' "$key" "$f32_1" "$good" >"$dir/stuck.json"
printf '{"format": "flaxpp.refs/1", "cases": [{"id": "runaway", "problem": "train_mlp", "inputs": {"seed": 0, "x": {"dtype": "float32", "shape": [2, 1], "data": [0, 1]}, "y": {"dtype": "int32", "shape": [2], "data": [0, 1]}, "features": [2], "optimizer": {"name": "sgd", "learning_rate": 0.1}, "policy": "none", "steps": 100000000, "batch_size": 2}, "expected": %s}]}' "$f32_1" >"$dir/runaway.json"
expect "memory refused" 1 'inputs.num: splitting a key into 1000000000 keys needs 48.0 GB of host memory, but 1.00 GB are available' -- env FLAXPP_HOST_MEMORY_LIMIT=1000000000 "$flaxpp" check "$dir/split.json"
expect "the run goes on" 1 '^1 passed, 1 failed$' -- env FLAXPP_HOST_MEMORY_LIMIT=1000000000 "$flaxpp" check "$dir/split.json"
printf '{"format": "flaxpp.refs/1", "cases": [{"id": "p", "problem": "array_op", "inputs": {"op": "lax.pad", "x": %s, "y": {"dtype": "float32", "shape": [], "data": [0]}, "padding_config": [[0, 100000000000, 0]]}, "expected": %s}]}' "$f32_1" "$f32_1" >"$dir/pad.json"
expect "memory refused for an array_op's sizes" 1 'inputs.op: lax.pad of these sizes needs 1.20 TB of host memory, but 1.00 GB are available' -- env FLAXPP_HOST_MEMORY_LIMIT=1000000000 "$flaxpp" check "$dir/pad.json"
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
# 45 training rows in batches of 8: 6 steps per epoch.
train_config() {  # train_config OUTPUT_DIR [, "more": "keys"]
  printf '{"data": {"path": "%s", "label_column": "label", "test_fraction": 0.25}, "model": {"features": [8, 3], "policy": "nothing_saveable"}, "optimizer": {"name": "adam", "learning_rate": 0.01}, "epochs": 3, "batch_size": 8, "seed": 5, "output_dir": "%s"%s}' "$dir/toy.csv" "$1" "${2:-}"
}
metrics_steps() {  # the epoch,step columns of a metrics.csv
  cut -d, -f1,2 "$1"
}
train_config "$dir/full" >"$dir/full.json"
train_config "$dir/resumed" >"$dir/resumed.json"
expect "train to the end" 0 '^test accuracy: [01]\.[0-9]{4}$' -- "$flaxpp" train "$dir/full.json"
expect "train stops with a checkpoint" 0 'stopped at step 7: checkpoint saved' -- "$flaxpp" train "$dir/resumed.json" --max-steps 7
expect "train resumes" 0 'resuming from .* at step 7' -- "$flaxpp" train "$dir/resumed.json"
train_config "$dir/budget" ', "memory_budget": "1GiB"' >"$dir/budget.json"
expect "train with a memory budget says its plan before the first step" 0 'planned peak: [0-9]+ bytes \(keeping everything: [0-9]+ bytes, the least: [0-9]+ bytes\)' -- "$flaxpp" train "$dir/budget.json" --max-steps 1
train_config "$dir/tight" ', "memory_budget": 1000' >"$dir/tight.json"
expect "train with a budget nothing fits names the least peak" 2 'no remat choice fits the memory budget of 1000 bytes: the least planned peak is [0-9]+ bytes' -- "$flaxpp" train "$dir/tight.json"
if cmp -s "$dir/full/checkpoint.json" "$dir/resumed/checkpoint.json"; then
  passed=$((passed + 1))
else
  failed=$((failed + 1))
  echo "FAIL resumed training: its final checkpoint differs from the uninterrupted run's"
fi
check "a resumed run's metrics rows are the uninterrupted run's" \
  cmp -s <(metrics_steps "$dir/full/metrics.csv") <(metrics_steps "$dir/resumed/metrics.csv")
# A run killed at arbitrary moments (SIGKILL: no chance to save) resumes from its last atomic
# checkpoint and still ends exactly where the uninterrupted run ends, with every metrics row
# once (a row is written before its checkpoint; rows past the checkpoint are dropped on resume).
train_config "$dir/killed" | sed 's/"epochs": 3/"epochs": 60/' >"$dir/killed.json"
train_config "$dir/long" | sed 's/"epochs": 3/"epochs": 60/' >"$dir/long.json"
"$flaxpp" train "$dir/long.json" >/dev/null 2>&1
for delay in 0.2 0.35 0.5 0.25 0.4; do
  "$flaxpp" train "$dir/killed.json" >/dev/null 2>&1 &
  sleep $delay
  kill -9 $! 2>/dev/null
  wait $! 2>/dev/null
done
expect "train resumes after kill -9" 0 '^test accuracy: ' -- "$flaxpp" train "$dir/killed.json"
check "training killed and resumed ends with the uninterrupted run's checkpoint" \
  cmp -s "$dir/long/checkpoint.json" "$dir/killed/checkpoint.json"
check "training killed and resumed has every metrics row once" \
  cmp -s <(metrics_steps "$dir/long/metrics.csv") <(metrics_steps "$dir/killed/metrics.csv")
# Ctrl-C (SIGINT) and SIGTERM (what schedulers send) stop at the next step boundary with a
# checkpoint, exit 128 + the signal, and the run resumes (SIGTERM was not handled before).
for sig in INT TERM; do
  train_config "$dir/sig$sig" | sed 's/"epochs": 3/"epochs": 100000/' >"$dir/sig$sig.json"
  "$flaxpp" train "$dir/sig$sig.json" >"$dir/sig$sig.out" 2>&1 &
  job=$!
  for _ in $(seq 300); do [ -e "$dir/sig$sig/checkpoint.json" ] && break; sleep 0.1; done
  kill -s "$sig" "$job"
  wait "$job"
  rc=$?
  want=$((128 + $(kill -l "$sig")))
  check "SIG$sig: exit $want" test "$rc" -eq "$want"
  check "SIG$sig: a checkpoint is saved, and said" grep -q "^interrupted at step [0-9]*: checkpoint saved" "$dir/sig$sig.out"
  check "SIG$sig: the run resumes from it" "$flaxpp" train "$dir/sig$sig.json" --max-steps 1
done
check "no temporary files are left" test -z "$(ls "$dir/killed" | grep tmp-)"
for f in metrics.csv run.json; do
  check "train writes $f" test -s "$dir/full/$f"
done
# curves.png exists in builds with cairo (flaxpp --version says which).
plots=yes
"$flaxpp" --version | grep -q 'plots: none' && plots=no
if [ $plots = yes ]; then
  check "curves.png is a compressed PNG" \
    bash -c '[ "$(head -c 8 "$1" | od -An -tx1 | tr -d " ")" = 89504e470d0a1a0a ] && [ "$(stat -c %s "$1")" -lt 200000 ]' _ "$dir/full/curves.png"
else
  check "a build without cairo writes no curves.png" test ! -e "$dir/full/curves.png"
fi

# Resuming: what may change (epochs, optimiser settings) and what is refused (batch_size,
# seed, data, model, another optimiser), with the way on named.
train_config "$dir/edge" >"$dir/edge.json"
expect "--max-steps on an epoch's last step" 0 'stopped at step 6: checkpoint saved' -- "$flaxpp" train "$dir/edge.json" --max-steps 6
check "--max-steps on an epoch's last step writes that epoch's row" \
  cmp -s <(metrics_steps "$dir/edge/metrics.csv") <(printf 'epoch,step\n1,6\n')
expect "--max-steps at or below the checkpoint's step takes no step" 0 'already at step 6 \(--max-steps 4\): no step taken' -- "$flaxpp" train "$dir/edge.json" --max-steps 4
train_config "$dir/edge" | sed 's/"batch_size": 8/"batch_size": 4/' >"$dir/edge_bs.json"
expect "a changed batch_size is refused" 2 '\$\.batch_size is 4 now, 8 in that run' -- "$flaxpp" train "$dir/edge_bs.json"
expect "a refusal says how to go on" 2 'pass --fresh' -- "$flaxpp" train "$dir/edge_bs.json"
train_config "$dir/edge" | sed 's/"seed": 5/"seed": 6/; s/"test_fraction": 0.25/"test_fraction": 0.3/' >"$dir/edge_seed.json"
expect "a changed seed and split are refused" 2 '\$\.data\.test_fraction is 0\.3 now, 0\.25 in that run.*' -- "$flaxpp" train "$dir/edge_seed.json"
train_config "$dir/edge" | sed 's/"name": "adam"/"name": "momentum"/' >"$dir/edge_opt.json"
expect "another optimiser is refused, naming the state it lacks" 2 'was not made with this config: the optimiser of \$\.optimizer has opt_state/.*trace.*which the checkpoint lacks' -- "$flaxpp" train "$dir/edge_opt.json"
cp "$dir/edge/run.json" "$dir/edge_run.json"
rm "$dir/edge/run.json"
expect "another optimiser is refused without run.json too" 2 'was not made with this config' -- "$flaxpp" train "$dir/edge_opt.json"
cp "$dir/edge_run.json" "$dir/edge/run.json"
train_config "$dir/edge" | sed 's/"features": \[8, 3\]/"features": [16, 3]/' >"$dir/edge_model.json"
expect "another model is refused" 2 '\$\.model\.features is \[16,3\] now, \[8,3\] in that run' -- "$flaxpp" train "$dir/edge_model.json"
train_config "$dir/edge" | sed 's/"learning_rate": 0.01/"learning_rate": 0.005/; s/"epochs": 3/"epochs": 2/' >"$dir/edge_lr.json"
expect "a changed learning rate resumes, and says so" 0 'note: resuming with a changed optimiser: \$\.optimizer is .*0\.005.* now' -- "$flaxpp" train "$dir/edge_lr.json"
expect "a finished run has nothing to train" 0 'nothing to train: the checkpoint is at step 12, the end of the 2 epochs; pass --fresh' -- "$flaxpp" train "$dir/edge_lr.json"
expect "--fresh trains from scratch" 0 'starting from scratch \(--fresh\): replacing the run' -- "$flaxpp" train "$dir/edge.json" --fresh
check "--fresh leaves only the new run's rows" \
  cmp -s <(metrics_steps "$dir/edge/metrics.csv") <(metrics_steps "$dir/full/metrics.csv")
# The CNN with batch norm (kind cnn): rows of 4 features as 2x2 images; stopped and resumed in
# every checkpoint format, it ends with the uninterrupted run's checkpoint (batch statistics
# included), byte for byte.
image_csv() {
  echo "a,b,c,d,label"
  for i in $(seq 0 59); do
    echo "$((i % 3 * 4 + i % 2)),$((i % 3 - i % 5)),$((i % 2 * 3)),$((i % 3 * 2 - i % 4)),$((i % 3))"
  done
}
image_csv >"$dir/images.csv"
cnn_config() {  # cnn_config OUTPUT_DIR FORMAT
  printf '{"data": {"path": "%s", "label_column": "label", "scale": 0.25, "test_fraction": 0.25}, "model": {"kind": "cnn", "features": [4], "classes": 3, "image_shape": [2, 2, 1], "use_batchnorm": true, "policy": "dots_saveable"}, "optimizer": {"name": "momentum", "learning_rate": 0.05}, "epochs": 3, "batch_size": 8, "seed": 5, "output_dir": "%s", "checkpoint_format": "%s"}' "$dir/images.csv" "$1" "$2"
}
for format in json safetensors msgpack; do
  cnn_config "$dir/cnn_full_$format" "$format" >"$dir/cnn_full_$format.json"
  cnn_config "$dir/cnn_resumed_$format" "$format" >"$dir/cnn_resumed_$format.json"
  expect "a CNN trains ($format)" 0 '^test accuracy: [01]\.[0-9]{4}$' -- "$flaxpp" train "$dir/cnn_full_$format.json"
  "$flaxpp" train "$dir/cnn_resumed_$format.json" --max-steps 7 >/dev/null 2>&1
  expect "a CNN resumes ($format)" 0 'resuming from .* at step 7' -- "$flaxpp" train "$dir/cnn_resumed_$format.json"
  check "a resumed CNN ends with the uninterrupted run's checkpoint ($format)" \
    cmp -s "$dir/cnn_full_$format/checkpoint.$format" "$dir/cnn_resumed_$format/checkpoint.$format"
done
check "the CNN's checkpoint holds its batch statistics" grep -q '"batch_stats"' "$dir/cnn_full_json/checkpoint.json"
cnn_config "$dir/cnn_bad" json | sed 's/"image_shape": \[2, 2, 1\]/"image_shape": [3, 2, 1]/' >"$dir/cnn_bad.json"
expect "an image shape that does not fit the rows" 2 'image_shape \[3, 2, 1\] needs rows of 6 features' -- "$flaxpp" train "$dir/cnn_bad.json"
cnn_config "$dir/cnn_classes" json | sed 's/"classes": 3/"classes": 2/' >"$dir/cnn_classes.json"
expect "labels past the CNN's classes" 2 'has label 2 .*, but the model has 2 classes \(\$\.model\.classes\)' -- "$flaxpp" train "$dir/cnn_classes.json"
# Dropout: each step's masks come from the step's number, so a resumed run drops as the
# uninterrupted one did; another seed drops other units.
for run in full resumed other; do
  cnn_config "$dir/cnn_drop_$run" json | sed 's/"use_batchnorm": true/"dropout": 0.25/' >"$dir/cnn_drop_$run.json"
done
sed -i 's/"seed": 5/"seed": 6/' "$dir/cnn_drop_other.json"
expect "a CNN with dropout trains" 0 '^test accuracy: [01]\.[0-9]{4}$' -- "$flaxpp" train "$dir/cnn_drop_full.json"
"$flaxpp" train "$dir/cnn_drop_resumed.json" --max-steps 5 >/dev/null 2>&1
expect "a CNN with dropout resumes" 0 'resuming from .* at step 5' -- "$flaxpp" train "$dir/cnn_drop_resumed.json"
check "a resumed CNN with dropout ends with the uninterrupted run's checkpoint" \
  cmp -s "$dir/cnn_drop_full/checkpoint.json" "$dir/cnn_drop_resumed/checkpoint.json"
"$flaxpp" train "$dir/cnn_drop_other.json" >/dev/null 2>&1
check "another seed's dropout run ends elsewhere" \
  bash -c "! cmp -s '$dir/cnn_drop_full/checkpoint.json' '$dir/cnn_drop_other/checkpoint.json'"
cnn_config "$dir/cnn_drop_bad" json | sed 's/"use_batchnorm": true/"dropout": 1/' >"$dir/cnn_drop_bad.json"
expect "a dropout rate of 1 is refused" 2 '\$\.model\.dropout: expected a rate in \[0, 1\), got 1' -- "$flaxpp" train "$dir/cnn_drop_bad.json"
cnn_config "$dir/cnn_drop_changed" json >"$dir/cnn_drop_changed.json"
"$flaxpp" train "$dir/cnn_drop_changed.json" --max-steps 3 >/dev/null 2>&1
sed -i 's/"use_batchnorm": true/"use_batchnorm": true, "dropout": 0.25/' "$dir/cnn_drop_changed.json"
expect "adding dropout to a run is refused on resume" 2 'model' -- "$flaxpp" train "$dir/cnn_drop_changed.json"
train_config "$dir/edge" ', "resume": false' >"$dir/edge_noresume.json"
expect '"resume": false trains from scratch' 0 'starting from scratch \("resume": false\)' -- "$flaxpp" train "$dir/edge_noresume.json"
expect '--resume overrides "resume": false' 0 'nothing to train' -- "$flaxpp" train "$dir/edge_noresume.json" --resume
expect "--fresh and --resume together" 2 '--fresh and --resume contradict each other' -- "$flaxpp" train "$dir/edge.json" --fresh --resume
sed -i 's/"step":{"data":\[18\]/"step":{"data":[-1]/' "$dir/edge/checkpoint.json"
expect "a negative step is refused" 2 '"step" must be an int32 scalar \(shape \[\]\) >= 0, got -1' -- "$flaxpp" train "$dir/edge.json"
printf '{"format": "flaxpp' >"$dir/edge/checkpoint.json"
expect "a damaged checkpoint names --fresh" 2 'The checkpoint cannot be resumed; pass --fresh to train from scratch' -- "$flaxpp" train "$dir/edge.json"
# A row past the checkpoint (killed between the metrics and the checkpoint write) is dropped.
train_config "$dir/ahead" >"$dir/ahead.json"
"$flaxpp" train "$dir/ahead.json" --max-steps 6 >/dev/null 2>&1
cp "$dir/ahead/checkpoint.json" "$dir/ahead_step6.json"
"$flaxpp" train "$dir/ahead.json" --max-steps 12 >/dev/null 2>&1
cp "$dir/ahead_step6.json" "$dir/ahead/checkpoint.json"
expect "rows past the checkpoint are written again" 0 'resuming from .* at step 6' -- "$flaxpp" train "$dir/ahead.json"
check "rows past the checkpoint are not duplicated" \
  cmp -s <(metrics_steps "$dir/ahead/metrics.csv") <(metrics_steps "$dir/full/metrics.csv")
# Temporary files of a killed writer are removed; a live process's are not.
sh -c 'exit 0' &
dead=$!
wait $dead
touch "$dir/ahead/checkpoint.json.tmp-$dead" "$dir/ahead/metrics.csv.tmp-$$"
expect "stale temporary files are removed" 0 'removed 1 temporary file left by an interrupted run' -- "$flaxpp" train "$dir/ahead.json"
check "a live process's temporary file is kept" test -e "$dir/ahead/metrics.csv.tmp-$$"
check "a dead process's temporary file is gone" test ! -e "$dir/ahead/checkpoint.json.tmp-$dead"

# Non-finite losses: stop without saving (the last finite checkpoint stays), or go on.
train_config "$dir/nan" >"$dir/nan.json"
"$flaxpp" train "$dir/nan.json" --max-steps 12 >/dev/null 2>&1
cp "$dir/nan/checkpoint.json" "$dir/nan_step12.json"
train_config "$dir/nan" | sed 's/"learning_rate": 0.01/"learning_rate": 1e30/' >"$dir/nan_lr.json"
expect "a NaN loss stops training" 1 'the loss became nan at step [0-9]+ .*checkpoint.json keeps step 12, the last finite one' -- timeout 60 "$flaxpp" train "$dir/nan_lr.json"
check "a NaN loss keeps the last finite checkpoint" cmp -s "$dir/nan_step12.json" "$dir/nan/checkpoint.json"
train_config "$dir/nan" ', "on_nonfinite": "continue"' | sed 's/"learning_rate": 0.01/"learning_rate": 1e30/' >"$dir/nan_go.json"
expect '"on_nonfinite": "continue" trains on' 0 'warning: the loss became nan at step' -- timeout 60 "$flaxpp" train "$dir/nan_go.json" --fresh
[ $plots = yes ] && check "a run with NaN losses still draws its curves" test -s "$dir/nan/curves.png"
check "NaN rows read back" grep -q '^3,18,nan,' "$dir/nan/metrics.csv"

# Data the model cannot learn from is refused before training.
python_free_csv | sed 's/,2$/,7/' >"$dir/labels.csv"
train_config "$dir/bad_data" | sed "s#$dir/toy.csv#$dir/labels.csv#" >"$dir/labels.json"
expect "a label >= the class count" 2 'labels.csv has label 7 \(data row 3\), but the model has 3 classes .*at least 8' -- "$flaxpp" train "$dir/labels.json"
python_free_csv | sed '5s/^[0-9]*,/nan,/' >"$dir/nan_feature.csv"
train_config "$dir/bad_data" | sed "s#$dir/toy.csv#$dir/nan_feature.csv#" >"$dir/nan_feature.json"
expect "a NaN feature" 2 'nan_feature.csv has the non-finite feature nan in data row 4, feature 1' -- "$flaxpp" train "$dir/nan_feature.json"
python_free_csv | sed '5s/^[0-9]*,/1e39,/' >"$dir/inf_feature.csv"
train_config "$dir/bad_data" | sed "s#$dir/toy.csv#$dir/inf_feature.csv#" >"$dir/inf_feature.json"
expect "a feature beyond float32" 2 'has the non-finite feature inf' -- "$flaxpp" train "$dir/inf_feature.json"
train_config "$dir/bad_data" | sed 's/"test_fraction": 0.25/"test_fraction": 0.001/' >"$dir/no_test.json"
expect "an empty test set" 2 '\$\.data\.test_fraction: 0\.001 of the 60 rows .* rounds to no test rows.*use at least 0\.00834' -- "$flaxpp" train "$dir/no_test.json"
train_config "$dir/bad_data" | sed 's/"test_fraction": 0.25/"test_fraction": 0.995/' >"$dir/no_train.json"
expect "an empty train set" 2 'leaves no rows to train on; use at most 0\.992' -- "$flaxpp" train "$dir/no_train.json"
check "refused data writes no checkpoint" test ! -e "$dir/bad_data/checkpoint.json"
train_config "$dir/bad_data" | sed 's/"label_column": "label"/"label_column": "digit"/' >"$dir/no_column.json"
expect "a label column the file lacks is named by its key" 2 'Set \$\.data\.label_column to one of them' -- "$flaxpp" train "$dir/no_column.json"
train_config "$dir/bad_data" | sed "s#$dir/toy.csv#$dir/nope.csv#" >"$dir/no_file.json"
expect "a data file that is not there" 2 '\$\.data\.path: cannot open .*nope.csv \(No such file or directory\); a relative path is taken from' -- "$flaxpp" train "$dir/no_file.json"

# Numbers that cannot be trained with, refused with the key; a huge batch is the whole set.
train_config "$dir/sizes" | sed 's/"batch_size": 8/"batch_size": 9223372036854775807/' >"$dir/huge_batch.json"
expect "batch_size 2^63-1 trains on all rows at once" 0 'note: \$\.batch_size 9223372036854775807 exceeds the 45 training rows' -- timeout 60 "$flaxpp" train "$dir/huge_batch.json"
train_config "$dir/sizes" | sed 's/"features": \[8, 3\]/"features": [1e12, 3]/' >"$dir/huge_model.json"
expect "a model larger than memory" 2 '\$\.model: training this model needs at least .* more than the .* of host memory available; use a smaller model' -- "$flaxpp" train "$dir/huge_model.json" --fresh
train_config "$dir/sizes" | sed 's/"epochs": 3/"epochs": 1e12/' >"$dir/huge_epochs.json"
expect "more steps than a checkpoint counts" 2 '\$\.epochs: 1000000000000 epochs of 6 steps is more than 2147483647 steps.*use at most 357913941 epochs' -- timeout 60 "$flaxpp" train "$dir/huge_epochs.json" --fresh

# The command line: flags named in every error, never the C++ library underneath.
expect "--max-steps abc" 2 '^flaxpp train: --max-steps: expected an integer from 0 to [0-9]+, got "abc"$' -- "$flaxpp" train "$dir/full.json" --max-steps abc
expect "--max-steps -5" 2 'got "-5"' -- "$flaxpp" train "$dir/full.json" --max-steps -5
expect "--max-steps without a value" 2 '--max-steps needs a value' -- "$flaxpp" train "$dir/full.json" --max-steps
train_config "$dir/zero" >"$dir/zero.json"
expect "--max-steps 0 saves the initial state" 0 'stopped at step 0: checkpoint saved' -- "$flaxpp" train "$dir/zero.json" --max-steps 0
check "--max-steps 0 takes no step" grep -q '"step":{"data":\[0\]' "$dir/zero/checkpoint.json"
train_config "$dir/zero" ', "resume": "yes"' >"$dir/resume_yes.json"
expect '"resume": "yes"' 2 '\$\.resume: expected true or false, got the string "yes"' -- "$flaxpp" train "$dir/resume_yes.json"
expect "two config files" 2 'one config file at a time' -- "$flaxpp" train "$dir/full.json" "$dir/zero.json"
expect "bench --steps abc" 2 '--steps: expected an integer from 1 to' -- "$flaxpp" bench --steps abc
expect "residuals -N x" 2 '-N: expected an integer from 1 to 65536, got "x"' -- "$flaxpp" residuals checkpoint_dot_policy -N x
expect "--version" 0 '^flaxpp [0-9]+\.[0-9]+\.[0-9]+ \(CUDA backend: (on|off), plots: ' -- "$flaxpp" --version
expect "help" 0 'help \[COMMAND\]' -- "$flaxpp" help
expect "help train" 0 '--fresh +train from scratch' -- "$flaxpp" help train
expect "help of an unknown command" 2 'expected one command .*got "nope"' -- "$flaxpp" help nope

# Output into files and pipes: no progress-bar frames, and stdout and stderr in order.
"$flaxpp" train "$dir/full.json" --fresh >"$dir/out.log" 2>"$dir/err.log"
check "no carriage returns in a redirected run" test "$(cat "$dir/out.log" "$dir/err.log" | tr -cd '\r' | wc -c)" -eq 0
check "no progress lines for a short redirected run" test ! -s "$dir/err.log"
"$flaxpp" train "$dir/nan_go.json" --fresh >"$dir/both.log" 2>&1
line_of() {  # line_of PATTERN FILE: the number of the first line matching PATTERN
  grep -nE -m1 -- "$1" "$2" | cut -d: -f1
}
in_order() {  # in_order FILE PATTERN...: each pattern first matches a later line than the one before
  local file=$1 last=0 n
  shift
  for p in "$@"; do
    n=$(line_of "$p" "$file")
    [ -n "$n" ] && [ "$n" -gt "$last" ] || return 1
    last=$n
  done
}
check "stdout and stderr keep their order in one log" \
  in_order "$dir/both.log" '^training on' '^starting from scratch' 'warning: the loss' '^epoch 1/3'
if [ $plots = no ]; then
  expect "a build without cairo says it draws no curves" 0 'note: curves.png is not drawn: this flaxpp was built without cairo' -- "$flaxpp" train "$dir/full.json" --fresh
fi
printf '{"data": {"path": "%s"}, "model": {"features": [3]}, "optimizer": {"name": "sgd", "learning_rate": 0.1}, "epochs": 1, "learning_rate": 3}' "$dir/toy.csv" >"$dir/bad.json"
expect "a malformed config names the key" 2 '\$\.learning_rate: unknown key; accepted keys:' -- "$flaxpp" train "$dir/bad.json"

# flaxpp train of a character-level language model, and flaxpp generate from it: a small text,
# a small model, a few steps; the sample is reproducible per seed.
for i in $(seq 1 40); do printf 'In the beginning God created the heaven and the earth. '; done >"$dir/tiny.txt"
lm_config() {  # lm_config OUTPUT_DIR [, "model": ...] -> a config on stdout
  printf '{"data": {"text": "%s", "seq_len": 16, "test_fraction": 0.2}, "model": {"kind": "lm", "features": 16, "num_layers": 2, "num_heads": 2, "mlp_dim": 32, "policy": "nothing_saveable"}, "optimizer": {"name": "adam", "learning_rate": 0.003}, "epochs": 1, "batch_size": 8, "seed": 1, "output_dir": "%s"}' "$dir/tiny.txt" "$1"
}
lm_config "$dir/lm" >"$dir/lm.json"
expect "train a language model" 0 '^test accuracy: [01]\.[0-9]{4}$' -- "$flaxpp" train "$dir/lm.json"
check "train writes the language model's vocabulary" test -s "$dir/lm/vocab.json"
check "a finished run leaves no lock" test ! -e "$dir/lm/train.lock"
# One run per output_dir (issue 33): a live lock is refused naming its process; a lock whose
# process is gone is taken over with a note; a curves.png that cannot be written is a warning.
mkdir -p "$dir/locked" && printf '%s %s\n' "$$" "$(uname -n)" >"$dir/locked/train.lock"
lm_config "$dir/locked" >"$dir/lm_locked.json"
expect "a second run in one output_dir is refused" 2 "is in use by another flaxpp train \(process $$ on " -- "$flaxpp" train "$dir/lm_locked.json"
check "the refused run leaves the other's lock" test -s "$dir/locked/train.lock"
sleep 0 & wait $!
printf '%s %s\n' "$!" "$(uname -n)" >"$dir/locked/train.lock"
expect "a stale lock is taken over with a note" 0 "note: took over .*train\.lock from process $!, which is gone" -- "$flaxpp" train "$dir/lm_locked.json"
mkdir -p "$dir/noplot/curves.png/in-the-way"
# A read-only output_dir is refused before anything is trained (it was found at the first
# checkpoint, after a whole epoch). Root writes anywhere, so as root the run is nobody's.
lm_config "$dir/readonly" >"$dir/lm_readonly.json"
"$flaxpp" train "$dir/lm_readonly.json" --max-steps 1 >/dev/null 2>&1
chmod 555 "$dir/readonly" && chmod 755 "$dir"
as_user=()
[ "$(id -u)" -eq 0 ] && as_user=(setpriv --reuid=65534 --regid=65534 --clear-groups)
expect "train: a read-only output_dir is refused before the first step" 2 "^flaxpp train: \\\$\.output_dir: cannot write in .*readonly \(Permission denied\); choose a directory you can write to" -- "${as_user[@]}" "$flaxpp" train "$dir/lm_readonly.json"
chmod 755 "$dir/readonly"
lm_config "$dir/noplot" >"$dir/lm_noplot.json"
out=$("$flaxpp" train "$dir/lm_noplot.json" 2>&1)
rc=$?
if grep -q 'curves.png is not drawn' <<<"$out" ||
   { [ "$rc" -eq 0 ] && grep -q 'curves.png could not be written .*training goes on' <<<"$out"; }; then
  passed=$((passed + 1))
else
  failed=$((failed + 1))
  printf 'FAIL a plot that cannot be written is a warning: exit %s, output:\n%s\n' "$rc" "$out"
fi
expect "generate continues the prompt" 0 '^In the beginning' -- "$flaxpp" generate "$dir/lm/checkpoint.json" --prompt "In the beginning" --tokens 20 --seed 3
a=$("$flaxpp" generate "$dir/lm/checkpoint.json" --prompt "God" --tokens 30 --seed 7 2>&1)
b=$("$flaxpp" generate "$dir/lm/checkpoint.json" --prompt "God" --tokens 30 --seed 7 2>&1)
check "generate: the same seed gives the same text" test "$a" = "$b" -a "${#a}" -eq 33
# The key-value cache samples what the window sampler does (issue 29): the prompt and 30
# characters fill the model's 16 positions and run past them, at temperature 1 and 0.
for t in 1 0; do
  a=$("$flaxpp" generate "$dir/lm/checkpoint.json" --prompt "In the" --tokens 30 --seed 5 --temperature $t 2>&1)
  b=$("$flaxpp" generate "$dir/lm/checkpoint.json" --prompt "In the" --tokens 30 --seed 5 --temperature $t --no-kv-cache 2>&1)
  check "generate: the cache gives the window's text (temperature $t)" test "$a" = "$b" -a "${#a}" -eq 36
done
expect "generate --timing says the characters per second" 0 '^sampled 4 characters in [0-9.e-]+ s \([0-9.e+]+ characters/s, with the key-value cache\)$' -- "$flaxpp" generate "$dir/lm/checkpoint.json" --prompt "In" --tokens 4 --timing
expect "generate: a character the text never had" 2 "the character 'Q' \(byte 81\) is not in the model's vocabulary of [0-9]+ characters" -- "$flaxpp" generate "$dir/lm/checkpoint.json" --prompt "Q"
expect "generate: no prompt" 2 'expected --prompt TEXT' -- "$flaxpp" generate "$dir/lm/checkpoint.json"
expect "generate: a negative temperature" 2 '--temperature: expected a number >= 0, got "-1"' -- "$flaxpp" generate "$dir/lm/checkpoint.json" --prompt G --temperature -1
expect "generate: an MLP's checkpoint" 2 'the run trained an MLP classifier' -- "$flaxpp" generate "$dir/full/checkpoint.json" --prompt G
mkdir -p "$dir/lone" && cp "$dir/lm/checkpoint.json" "$dir/lone/"
expect "generate: a checkpoint without its run files" 2 'run.json: missing; generate reads the run.json and vocab.json' -- "$flaxpp" generate "$dir/lone/checkpoint.json" --prompt G
# A refused run writes nothing into output_dir: vocab.json stays the checkpoint's (another text
# path is refused by run.json; a text changed in place, by its characters).
cp "$dir/lm/vocab.json" "$dir/vocab_before.json"
for i in $(seq 1 40); do printf 'Quick zebras jump over the lazy dog! '; done >"$dir/other.txt"
lm_config "$dir/lm" | sed "s|$dir/tiny.txt|$dir/other.txt|" >"$dir/lm_other.json"
expect "resume: another text is refused" 2 '\$\.data\.text is .*other\.txt. now' -- "$flaxpp" train "$dir/lm_other.json"
check "a refused resume leaves vocab.json as it was" cmp -s "$dir/lm/vocab.json" "$dir/vocab_before.json"
cp "$dir/tiny.txt" "$dir/changing.txt"
lm_config "$dir/lm_changing" | sed "s|$dir/tiny.txt|$dir/changing.txt|" >"$dir/lm_changing.json"
expect "train the run whose text will change" 0 '^test accuracy' -- "$flaxpp" train "$dir/lm_changing.json"
cp "$dir/lm_changing/vocab.json" "$dir/vocab_before.json"
check "run.json records the text's SHA-256" grep -q "\"data_sha256\": \"$(sha256sum "$dir/changing.txt" | cut -d' ' -f1)\"" "$dir/lm_changing/run.json"
check "run.json records the remat policy" grep -q '"policy": "nothing_saveable"' "$dir/lm_changing/run.json"
# The same characters in another order: the vocabulary cannot tell, the content hash does.
rev "$dir/tiny.txt" >"$dir/changing.txt"
expect "resume: a text changed in place with the same characters is refused by its hash" 2 "\\\$\.data\.text .*changing\.txt changed since that run read it: its content's SHA-256 is [0-9a-f]{16}… now, [0-9a-f]{16}… in that run" -- "$flaxpp" train "$dir/lm_changing.json"
check "that refusal leaves vocab.json as it was" cmp -s "$dir/lm_changing/vocab.json" "$dir/vocab_before.json"
# A run recorded by an older flaxpp (no hash): the characters still refuse another text.
grep -v '"data_sha256"' "$dir/lm_changing/run.json" >"$dir/old_run.json" && mv "$dir/old_run.json" "$dir/lm_changing/run.json"
cp "$dir/other.txt" "$dir/changing.txt"
expect "resume: an older run's text changed in place is refused by its characters" 2 "the training text's characters differ from those of the run in .*lm_changing: .*vocab\.json has [0-9]+ characters, the text now" -- "$flaxpp" train "$dir/lm_changing.json"
cp "$dir/tiny.txt" "$dir/changing.txt"
lm_config "$dir/lm_changing" | sed "s|$dir/tiny.txt|$dir/changing.txt|; s/\"epochs\": 1/\"epochs\": 2/" >"$dir/lm_changing2.json"
expect "resume: an older run.json is completed with a note" 0 "note: .*run\.json does not record the data's content hash \(a run of an older flaxpp\): recording this run's, unchecked" -- "$flaxpp" train "$dir/lm_changing2.json"
check "and then records the hash" grep -q '"data_sha256"' "$dir/lm_changing/run.json"
# Another remat policy resumes with a note; none where there was one changes the parameters'
# names, and is refused naming the policy.
sed 's/"nothing_saveable"/"dots_saveable"/; s/"epochs": 2/"epochs": 3/' "$dir/lm_changing2.json" >"$dir/lm_dots.json"
expect "resume: another remat policy resumes, and says so" 0 'note: resuming with a changed remat policy: \$\.model\.policy is dots_saveable now, nothing_saveable in that run' -- "$flaxpp" train "$dir/lm_dots.json"
sed 's/, "policy": "dots_saveable"//; s/"epochs": 3/"epochs": 4/' "$dir/lm_dots.json" >"$dir/lm_nopolicy.json"
expect "resume: dropping the remat policy is refused naming it" 2 '\$\.model\.policy is none now, dots_saveable in that run \(a model with a remat policy names its parameters apart from one without\)' -- "$flaxpp" train "$dir/lm_nopolicy.json"
# generate refuses what it cannot sample from, naming the file (issue 33): each case is the lm
# run's files with one of them changed.
altered_run() {  # altered_run NAME FILE < new FILE -> $dir/NAME: the lm run with FILE replaced
  mkdir -p "$dir/$1" && cp "$dir/lm/checkpoint.json" "$dir/lm/run.json" "$dir/lm/vocab.json" "$dir/$1/"
  cat >"$dir/$1/$2"
}
printf '{"format": "flaxpp.vocab/1", "bytes": [73, 110, 73]}\n' | altered_run twice vocab.json
expect "generate: a vocabulary that repeats a character" 2 'twice/vocab\.json: byte 73 appears twice' -- "$flaxpp" generate "$dir/twice/checkpoint.json" --prompt I
sed 's/\("params":{"Dense_0":{"bias":{"data":\[\)[^,]*/\1"NaN"/' "$dir/lm/checkpoint.json" | altered_run nan checkpoint.json
expect "generate: non-finite parameters" 2 'nan/checkpoint\.json: the parameter params/Dense_0/bias holds a NaN or an infinity' -- "$flaxpp" generate "$dir/nan/checkpoint.json" --prompt I
printf '{"format": "flaxpp.vocab/1", "bytes": [73, 110]}\n' | altered_run small vocab.json
expect "generate: a vocabulary of another size" 2 'small/checkpoint\.json: not the model its run\.json and vocab\.json describe: the checkpoint.s params/Dense_0/bias is f32\[[0-9]+\]' -- "$flaxpp" generate "$dir/small/checkpoint.json" --prompt I
sed 's/"num_heads": 2/"num_heads": "two"/' "$dir/lm/run.json" | altered_run badrun run.json
expect "generate: a damaged run.json is named" 2 'badrun/run\.json: \$\.model\.num_heads: expected an integer' -- "$flaxpp" generate "$dir/badrun/checkpoint.json" --prompt I
expect "generate: a directory as the checkpoint" 2 'lm: a directory; give the checkpoint file in it' -- "$flaxpp" generate "$dir/lm" --prompt I
expect "generate: control characters are escaped" 2 "the character '.x01' \(byte 1\)" -- "$flaxpp" generate "$dir/lm/checkpoint.json" --prompt "$(printf 'I\001')"
lm_config "$dir/lm" | sed 's/"num_heads": 2/"num_heads": 3/' >"$dir/lm_heads.json"
# Data that is no regular file is refused at once (a directory gave an internal error; a
# device or a pipe was read until memory ran out).
lm_config "$dir/lm_dirtext" | sed "s|$dir/tiny.txt|$dir|" >"$dir/lm_dirtext.json"
expect "train: a directory as the text" 2 "\\\$\.data\.text: $dir is a directory; flaxpp train reads its data from a regular file" -- timeout 60 "$flaxpp" train "$dir/lm_dirtext.json"
lm_config "$dir/lm_zero" | sed "s|$dir/tiny.txt|/dev/zero|" >"$dir/lm_zero.json"
expect "train: a device as the text" 2 '\$\.data\.text: /dev/zero is a character device' -- timeout 60 "$flaxpp" train "$dir/lm_zero.json"
mkfifo "$dir/pipe.csv"
train_config "$dir/fifo_run" | sed "s|$dir/toy.csv|$dir/pipe.csv|" >"$dir/fifo.json"
expect "train: a named pipe as the CSV" 2 '\$\.data\.path: .*pipe\.csv is a named pipe' -- timeout 60 "$flaxpp" train "$dir/fifo.json"
expect "train: heads that do not divide the width" 2 '\$\.model\.num_heads: 3 heads do not divide the width \$\.model\.features 16' -- "$flaxpp" train "$dir/lm_heads.json"
lm_config "$dir/lm" | sed 's/"kind": "lm", //' >"$dir/lm_kind.json"
expect "train: a text without kind lm" 2 '\$\.model\.num_layers: a language-model setting; add "kind": "lm"' -- "$flaxpp" train "$dir/lm_kind.json"
# The text is read from its file a batch at a time (issue 33): a 37 MB text needs no more memory
# than a 1 MB one (reading it whole took 17 bytes per character: 620 MB more here). Two steps
# each; the closing line gives the run's peak.
cp "$dir/tiny.txt" "$dir/small.txt"
for i in $(seq 1 9); do cat "$dir/small.txt" "$dir/small.txt" >"$dir/double.txt" && mv "$dir/double.txt" "$dir/small.txt"; done
cp "$dir/small.txt" "$dir/big.txt"
for i in $(seq 1 5); do cat "$dir/big.txt" "$dir/big.txt" >"$dir/double.txt" && mv "$dir/double.txt" "$dir/big.txt"; done
peak_mb() {  # peak_mb NAME TEXT -> the peak memory in MB of two steps on TEXT
  lm_config "$dir/peak_$1" | sed "s|$dir/tiny.txt|$2|; s/\"seq_len\": 16/\"seq_len\": 256/" >"$dir/peak_$1.json"
  "$flaxpp" train "$dir/peak_$1.json" --max-steps 2 2>&1 |
    sed -n 's/.*(peak memory \([0-9.]*\) \([kMG]\)B).*/\1 \2/p' |
    awk '{ print $1 * ($2 == "k" ? 0.001 : ($2 == "G" ? 1000 : 1)) }'
}
small_mb=$(peak_mb small "$dir/small.txt")
big_mb=$(peak_mb big "$dir/big.txt")
check "train: a 37 MB text peaks within 12 MB of a 1 MB one (${small_mb:-?} MB, ${big_mb:-?} MB)" \
  awk -v s="$small_mb" -v b="$big_mb" 'BEGIN { exit !(s > 0 && b > 0 && b - s < 12) }'
rm -f "$dir/small.txt" "$dir/big.txt"
lm_config "$dir/lm" | sed 's/"seq_len": 16/"seq_len": 2000/' >"$dir/lm_long.json"
expect "train: sequences longer than the text" 2 '\$\.data\.seq_len: .* not enough for two sequences of 2001' -- "$flaxpp" train "$dir/lm_long.json" --fresh
lm_config "$dir/lm_big" | sed 's/"batch_size": 8/"batch_size": 100000/' >"$dir/lm_big.json"
expect "train: a batch whose activations exceed the memory available says to lower batch_size" 2 'of host memory available; lower \$\.batch_size' -- env FLAXPP_HOST_MEMORY_LIMIT=100000 "$flaxpp" train "$dir/lm_big.json"
lm_config "$dir/lm" | sed 's/"seq_len": 16/"seq_len": 9223372036854775807/' >"$dir/lm_longest.json"
expect "train: the longest seq_len does not overflow the message" 2 'not enough for two sequences of 9223372036854775808 ' -- "$flaxpp" train "$dir/lm_longest.json" --fresh

# flaxpp bench: one timed step per configuration; 12 JSON lines with the schema bench_jax.py shares.
expect "bench runs the default grid" 0 '' -- "$flaxpp" bench --steps 1 --out "$dir/bench.jsonl"
if [ "$(grep -c '"framework":"flaxpp"' "$dir/bench.jsonl")" -eq 12 ] &&
   [ "$(grep -c '"gemm_floor_ms"' "$dir/bench.jsonl")" -eq 12 ]; then
  passed=$((passed + 1))
else
  failed=$((failed + 1))
  echo "FAIL bench: expected 12 JSON lines with the shared keys"
fi

expect "bench --model lm times the language model per policy" 0 '"model":"lm","ops_per_step":[0-9]+,"ops_per_step_unfused":[0-9]+,"peak_bytes":[0-9]+,"policy":"nothing_saveable"' -- "$flaxpp" bench --model lm --steps 1
expect "bench --model: another model" 2 '--model is mlp or lm, got cnn' -- "$flaxpp" bench --model cnn

# No error message shows a C++ type, a conversion function or the JSON library's exception.
check "errors name flags and keys, not internals" \
  bash -c '! grep -nE "json\.exception|stoll|stoi|CsvOptions|std::|unexpected error|terminate called" "$1"' _ "$dir/errors.log"

# flaxpp launch starts mpirun as its child (to pass Ctrl-C on): one that cannot be run is named,
# with what to install, as when launch exec'd it.
expect "launch: an mpirun that is not there" 2 '^flaxpp launch: cannot run /nonexistent/mpirun \(No such file or directory\): .*apt-get install openmpi-bin' -- env FLAXPP_MPIRUN=/nonexistent/mpirun "$flaxpp" launch -n 2 -- train "$dir/lm.json"

checks_summary
