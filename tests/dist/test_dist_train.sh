#!/usr/bin/env bash
# `flaxpp train` as a data-parallel job of 2 processes (issue 19), against the one-process run
# with the same global batches, seeds and order:
#   - SGD, 20 steps: the checkpoints agree within rtol 1e-5, the epoch's metrics (reduced over
#     the processes) within 2e-4, and only process 0 speaks; the run checks at every checkpoint
#     that both processes hold the same parameter bits (TrainJob::check_replicas);
#   - SGD under a remat policy within rtol 1e-5, Adam under another within rtol 1e-3 (Adam amplifies summation-order differences);
#   - a CNN with batch norm: the processes average their batch statistics (BatchNorm's
#     axis_name) and train as one process, statistics included, within rtol 1e-3 (atol 1e-5);
#   - a CNN with dropout trains as a job of 2, each process dropping its own units;
#   - a checkpoint written by 2 processes resumes in 1 to the one-process result;
#   - flaxpp launch runs the same job, and flaxpp bench --processes reports jobs of 1 and 2;
#   - batches too small to share are refused, naming the key;
#   - a killed process ends the job (non-zero, mpirun naming the rank) and the last checkpoint
#     stays readable;
#   - processes with other configs, or other files at the data path, are refused at once;
#   - an error on one process, or a stalled one, ends the whole job within seconds;
#   - SIGTERM to mpirun stops every process at one step boundary with a checkpoint; SIGTERM or
#     Ctrl-C to flaxpp launch does so too, and the job exits 143 or 130.
# Usage: test_dist_train.sh FLAXPP COMPARE_CHECKPOINTS DIGITS_CSV MPIRUN [MPIRUN ARGS...]
set -u
flaxpp=$1 compare=$2 digits=$3
shift 3
mpirun=("$@")
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
source "$(dirname "$0")/../harness/checks.sh"

config() {  # config NAME OPTIMIZER POLICY BATCH_SIZE EPOCHS
  printf '{"data": {"path": "%s", "label_column": "label", "scale": 0.0625, "test_fraction": 0.2},
  "model": {"features": [64, 10], "activation": "relu", "policy": "%s"},
  "optimizer": %s, "epochs": %s, "batch_size": %s, "seed": 3, "device": "cpu",
  "output_dir": "%s", "checkpoint_format": "json"}\n' \
    "$digits" "$3" "$2" "$5" "$4" "$dir/$1" >"$dir/$1.json"
}

train1() { "$flaxpp" train "$dir/$1.json" "${@:2}" >"$dir/$1.out" 2>&1; }
train2() { "${mpirun[@]}" "$flaxpp" train "$dir/$1.json" "${@:2}" >"$dir/$1.out" 2>&1; }
same_checkpoints() { "$compare" "$dir/$1/checkpoint.json" "$dir/$2/checkpoint.json" "${@:3}"; }

# The numbers of the first "epoch 1/..." line of two outputs agree within 2e-4.
same_epoch_metrics() {
  local a b
  a=$(grep -m1 '^epoch 1/' "$dir/$1.out" | grep -oE '[0-9]+\.[0-9]{4}' | head -4)
  b=$(grep -m1 '^epoch 1/' "$dir/$2.out" | grep -oE '[0-9]+\.[0-9]{4}' | head -4)
  [ "$(wc -w <<<"$a")" -eq 4 ] || { echo "no epoch line in $1.out"; return 1; }
  paste <(tr ' ' '\n' <<<"$a") <(tr ' ' '\n' <<<"$b") |
    awk '{ d = $1 - $2; if (d < 0) d = -d; if (d > 2e-4) { print "differ: " $0; bad = 1 } }
         END { exit bad }'
}

# One process and two on the same config (NAME1, NAME2): both train 20 steps, and the two
# processes' checkpoint is the one process's within RTOL.
one_and_two() {  # one_and_two WHAT NAME OPTIMIZER POLICY RTOL
  local what=$1 name=$2
  config "${name}1" "$3" "$4" 128 2
  config "${name}2" "$3" "$4" 128 2
  check "$what, one process" train1 "${name}1" --max-steps 20
  check "$what, two processes" train2 "${name}2" --max-steps 20
  check "$what: two processes give one's parameters (rtol $5)" same_checkpoints "${name}2" "${name}1" "$5"
}

# 12 steps an epoch (1438 rows, batches of 128; the last of 30 rows, split 15 + 15).
sgd='{"name": "sgd", "learning_rate": 0.1}'
one_and_two SGD sgd "$sgd" none 1e-5
check "two processes give one's epoch metrics" same_epoch_metrics sgd2 sgd1
check "only process 0 speaks" test "$(grep -c '^stopped at step 20' "$dir/sgd2.out")" -eq 1
check "process 0 says it leads 2" grep -q 'in each of 2 processes' "$dir/sgd2.out"
one_and_two "SGD under remat" remat "$sgd" dots_with_no_batch_dims_saveable 1e-5
one_and_two "Adam under remat" adam '{"name": "adam", "learning_rate": 0.003}' nothing_saveable 1e-3

# The CNN with batch norm: each process normalises by the mean of the processes' batch
# statistics (BatchNorm's axis_name), so two processes train as one, statistics included.
cnn_config() {  # cnn_config NAME [MORE_MODEL_SETTINGS]
  printf '{"data": {"path": "%s", "label_column": "label", "scale": 0.0625, "test_fraction": 0.2},
  "model": {"kind": "cnn", "features": [8], "classes": 10, "image_shape": [8, 8, 1],
            "use_batchnorm": true, "policy": "dots_saveable"%s},
  "optimizer": {"name": "sgd", "learning_rate": 0.1}, "epochs": 2, "batch_size": 128, "seed": 3,
  "device": "cpu", "output_dir": "%s", "checkpoint_format": "json"}\n' "$digits" "${2:-}" "$dir/$1" >"$dir/$1.json"
}
cnn_config bn1
cnn_config bn2
check "a CNN with batch norm, one process" train1 bn1 --max-steps 20
check "a CNN with batch norm, two processes" train2 bn2 --max-steps 20
# The conv bias before a batch norm has a gradient that is zero up to rounding: it needs atol.
check "a CNN with batch norm: two processes give one's parameters and statistics (rtol 1e-3)" \
  same_checkpoints bn2 bn1 1e-3 1e-5
# With dropout each process folds its rank into the step's key, so the replicas drop different
# units; the reduced gradients keep their parameters one (checked at every checkpoint).
cnn_config drop2 ', "dropout": 0.5'
check "a CNN with dropout, two processes" train2 drop2 --max-steps 20

config resumed "$sgd" none 128 2
check "two processes stop at step 10" train2 resumed --max-steps 10
check "one process resumes them" train1 resumed --max-steps 20
check "the resumed run resumed" grep -q 'resuming from .* at step 10' "$dir/resumed.out"
check "resumed at world size 1: the one-process result" same_checkpoints resumed sgd1 1e-5

config launched "$sgd" none 128 2
check "flaxpp launch -n 2 trains" "$flaxpp" launch -n 2 -- train "$dir/launched.json" --max-steps 20
check "flaxpp launch: the two-process result" same_checkpoints launched sgd2 0

config tiny "$sgd" none 1437 1  # 1438 training rows: the last batch has 1 row
"${mpirun[@]}" "$flaxpp" train "$dir/tiny.json" >"$dir/tiny.out" 2>&1
check "a batch of 1 row over 2 processes is refused" grep -q '\$\.batch_size: 1437 over the 1438 training rows gives batches of as few as 1 rows, fewer than the 2 processes' "$dir/tiny.out"

# Waits (up to 60 s) until the run NAME has a checkpoint.
wait_for_checkpoint() {
  for _ in $(seq 600); do
    [ -e "$dir/$1/checkpoint.json" ] && return
    sleep 0.1
  done
}
# The pid of rank 1 of the job training NAME.json (empty when not found).
rank1_pid() {
  local p
  for p in $(pgrep -f "train $dir/$1.json"); do
    if tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx 'OMPI_COMM_WORLD_RANK=1'; then echo "$p"; fi
  done
}

# Processes that would not train the same run are refused before the first collective that
# depends on it, every process naming the one that differs (issue 33): each rank reads the
# config and data of its own folder (rank$OMPI_COMM_WORLD_RANK), through relative paths.
per_rank() {  # per_rank NAME CONFIG_FILE: the job, each rank in $dir/NAME/rank<R>
  local start=$SECONDS
  timeout 120 "${mpirun[@]}" sh -c "cd '$dir/$1/rank'\$OMPI_COMM_WORLD_RANK && exec '$flaxpp' train $2" >"$dir/$1.out" 2>&1
  local rc=$?
  check "$1: the job ends non-zero" test "$rc" -ne 0 -a "$rc" -ne 124
  check "$1: within 30 s, not at a collective's time-out" test $((SECONDS - start)) -le 30
}
for r in 0 1; do
  mkdir -p "$dir/mismatch/rank$r" "$dir/otherdata/rank$r"
  cp "$digits" "$dir/mismatch/rank$r/data.csv"
  cp "$digits" "$dir/otherdata/rank$r/data.csv"
  config "rank$r" "$sgd" none 128 1
  sed "s|$digits|data.csv|; s|\"features\": \[64|\"features\": [$((64 + 32 * r))|" "$dir/rank$r.json" >"$dir/mismatch/rank$r/run.json"
  sed "s|$digits|data.csv|" "$dir/rank0.json" >"$dir/otherdata/rank$r/run.json"
done
sed -i '2s/^\([^,]*\),[0-9]*/\1,7/' "$dir/otherdata/rank1/data.csv"  # one feature of one row
per_rank mismatch run.json
check "mismatched configs: process 1 is named" grep -q 'process 1 of 2 has another config than process 0' "$dir/mismatch.out"
per_rank otherdata run.json
check "another file at the same path: named, with both hashes" grep -qE '\$\.data\.path data\.csv: process 1 of 2 read another file than process 0 \(its content.s SHA-256 begins [0-9a-f]{16} there, [0-9a-f]{16} on process 0\)' "$dir/otherdata.out"

# An error on one process only (its data file is missing) ends the job at once: the error
# aborts the job instead of leaving process 0 waiting in the first collective.
mkdir -p "$dir/onemissing/rank0" "$dir/onemissing/rank1"
cp "$digits" "$dir/onemissing/rank0/data.csv"
cp "$dir/otherdata/rank0/run.json" "$dir/onemissing/rank0/run.json"
cp "$dir/otherdata/rank0/run.json" "$dir/onemissing/rank1/run.json"
per_rank onemissing run.json
check "an error on one process: its message, and mpirun's abort" grep -q 'rank 1 of 2.*cannot open data.csv' "$dir/onemissing.out"

# A stalled process (SIGSTOP) once a checkpoint exists: the other's collective times out, and
# the whole job ends (it used to wait in MPI_Finalize forever).
config stalled "$sgd" none 32 400
FLAXPP_COLLECTIVE_TIMEOUT=3 timeout 120 "${mpirun[@]}" "$flaxpp" train "$dir/stalled.json" >"$dir/stalled.out" 2>&1 &
job=$!
wait_for_checkpoint stalled
stopped=$(rank1_pid stalled)
check "rank 1 of the stalled job found" test -n "$stopped"
[ -n "$stopped" ] && kill -STOP "$stopped"
start=$SECONDS
wait "$job"
rc=$?
[ -n "$stopped" ] && kill -KILL "$stopped" 2>/dev/null
check "a stalled process: the job ends, non-zero, not at timeout's limit" test "$rc" -ne 0 -a "$rc" -ne 124
check "within 30 s" test $((SECONDS - start)) -le 30
check "process 0 names the time-out" grep -q 'rank 0 of 2.*did not complete within 3 s' "$dir/stalled.out"

# SIGTERM to mpirun (a scheduler's stop, or Ctrl-C at its terminal): mpirun sends SIGTERM to
# the processes (after odls_base_sigkill_timeout, 1 s), which stop together at the next step
# boundary with one checkpoint, before its SIGKILL; mpirun itself then exits 1.
config termed "$sgd" none 32 400
"${mpirun[@]}" "$flaxpp" train "$dir/termed.json" >"$dir/termed.out" 2>&1 &
job=$!
wait_for_checkpoint termed
kill -TERM "$job"
start=$SECONDS
wait "$job"
check "SIGTERM to mpirun: the job ends within 15 s" test $((SECONDS - start)) -le 15
check "SIGTERM to mpirun: one checkpoint saved at a step boundary" test "$(grep -c '^interrupted at step [0-9]*: checkpoint saved' "$dir/termed.out")" -eq 1
check "SIGTERM to mpirun: the run resumes from it" "$flaxpp" train "$dir/termed.json" --max-steps 1

# SIGTERM and Ctrl-C (SIGINT) to flaxpp launch: passed on to the processes (as SIGUSR2 and
# SIGUSR1, which mpirun forwards), which stop together with one checkpoint; the job exits 143
# or 130, as one process does.
for sig in TERM INT; do
  config "launch_$sig" "$sgd" none 32 400
  "$flaxpp" launch -n 2 -- train "$dir/launch_$sig.json" >"$dir/launch_$sig.out" 2>&1 &
  job=$!
  wait_for_checkpoint "launch_$sig"
  kill "-$sig" "$job"
  start=$SECONDS
  wait "$job"
  rc=$?
  want=$([ "$sig" = TERM ] && echo 143 || echo 130)
  check "SIG$sig to flaxpp launch: exit $want (got $rc)" test "$rc" -eq "$want"
  check "SIG$sig to flaxpp launch: within 15 s" test $((SECONDS - start)) -le 15
  check "SIG$sig to flaxpp launch: one checkpoint saved at a step boundary" test "$(grep -c '^interrupted at step [0-9]*: checkpoint saved' "$dir/launch_$sig.out")" -eq 1
done
check "SIGTERM to flaxpp launch: the run resumes from it" "$flaxpp" train "$dir/launch_TERM.json" --max-steps 1

# A killed process: rank 1 gets SIGKILL once a checkpoint exists.
config killed "$sgd" none 32 400
"${mpirun[@]}" "$flaxpp" train "$dir/killed.json" >"$dir/killed.out" 2>&1 &
job=$!
wait_for_checkpoint killed
victim=$(rank1_pid killed)
check "rank 1 of the killed job found" test -n "$victim"
[ -n "$victim" ] && kill -9 "$victim"
start=$SECONDS
wait "$job"
rc=$?
check "a killed process ends the job, non-zero" test "$rc" -ne 0
check "within 60 s" test $((SECONDS - start)) -le 60
check "mpirun names the rank" grep -qE 'rank 1 .*(exited on signal 9|killed)' "$dir/killed.out"
check "the last checkpoint is intact" "$flaxpp" train "$dir/killed.json" --resume --max-steps 1

# flaxpp bench --processes: a JSON line per job, with its scaling and communication.
"$flaxpp" bench --processes 1,2 --width 64 --steps 3 --device cpu >"$dir/bench.jsonl" 2>"$dir/bench.err"
check "bench --processes: a line per job" test "$(grep -c '"benchmark":"data_parallel"' "$dir/bench.jsonl")" -eq 2
check "bench --processes: two processes communicate" grep -qE '"comm_calls_per_step":[1-9].*"processes":2.*"scaling_efficiency"' "$dir/bench.jsonl"
"$flaxpp" bench --processes 1,1 >"$dir/bench_bad.out" 2>&1
check "bench --processes refuses a repeated count" grep -q -- '--processes 1,1: each count once' "$dir/bench_bad.out"

checks_summary
