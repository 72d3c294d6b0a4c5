#!/usr/bin/env bash
# The GPU verification of the CUDA backend built ON the GPU machine, for one with a package
# registry (or .device/), cmake >= 3.25 and time to build. Where GPU time is short, build here
# and carry the binaries instead: scripts/gpu_pack.sh, then .gpu-carry/gpu_run.sh there
# (docs/GPU.md). This script runs as two commands:
#
#   bash scripts/gpu_check.sh            # build, test, bench
#   bash scripts/gpu_check.sh memcheck   # build, memcheck
#
# or any steps by name: bash scripts/gpu_check.sh build test ...
#
#   build     configure (CUDA and cuDNN forced on: a miss fails loudly) and build for Hopper
#             (sm_90) into ${FLAXPP_BUILD_DIR:-build-gpu}, incrementally; every other step
#             starts with it, so a fresh machine rebuilds and a warm one does not
#   test      ctest: every suite, the *_on_cuda reruns and flaxpp_cuda_tests (cuDNN required to
#             run: FLAXPP_REQUIRE_CUDNN=1); fails unless the
#             CUDA jobs are listed and none of them was skipped
#   refs      flaxpp check --device cuda over every committed reference case (what the test
#             step's flaxpp_check_refs_on_cuda does already: not a default step)
#   bench     tests/flaxpp_kernel_bench (each kernel launcher alone: checked, then timed; JSON
#             lines into kernel_bench.jsonl beside the log), then scripts/bench.sh --gpu: flaxpp
#             and JAX side by side in bf16 (FLAXPP_BENCH_PYTHON, default python3), table and
#             plots into docs/bench/gpu/
#   memcheck  compute-sanitizer memcheck over the CUDA suite without its (large) cases, then the
#             optim suite on CUDA, within MEMCHECK_SECONDS (default 360); says so plainly when
#             the sanitizer cannot run on the device or a suite is cut short
#
# The whole command keeps within GPU_CHECK_LIMIT seconds (default 560: the machine's commands
# end at 600): a step that would start too late is reported NOT RUN, a running one is stopped
# at the limit and reported as such, so the summary lines always come back.
# Output: one log per command, ${GPU_CHECK_OUT:-$OUT or build-gpu/check}/gpu_check-<steps>.log,
# with the bench table and plots beside it; then one summary line per step, last.
# Debian packages: where `.device/setup.sh` exists (made by ../shared/device/pack.sh), it
# provides them and apt is not used. cuDNN is found in the CUDA toolkit or, failing that, in the
# nvidia-cudnn Python wheel, whose lib/ then goes on LD_LIBRARY_PATH (cuDNN loads its
# sub-libraries by soname).
# shellcheck disable=SC2317  # the do_* steps are called through run_step
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1

steps=("$@")
[ ${#steps[@]} -eq 0 ] && steps=(build test bench)
for step in "${steps[@]}"; do
  case $step in
    build | test | refs | bench | memcheck) ;;
    *)
      echo "gpu_check: unknown step \"$step\"; the steps are build, test, refs, bench, memcheck" >&2
      exit 2
      ;;
  esac
done
build_dir=${FLAXPP_BUILD_DIR:-build-gpu}
out=${GPU_CHECK_OUT:-${OUT:-$build_dir/check}}
mkdir -p "$out"
log="$out/gpu_check-$(IFS=-; echo "${steps[*]}").log"
: >"$log"

if [ -f .device/setup.sh ]; then
  # shellcheck disable=SC1091
  source .device/setup.sh >>"$log" 2>&1
  export FLAXPP_NO_APT=1
fi
if [ -z "${CUDNN_ROOT:-}" ] && ! ls /usr/local/cuda/lib*/libcudnn.so* >/dev/null 2>&1; then
  CUDNN_ROOT=$(python3 -c "import nvidia.cudnn as m; print(m.__path__[0])" 2>/dev/null || true)
fi
if [ -n "${CUDNN_ROOT:-}" ]; then
  export CUDNN_ROOT LD_LIBRARY_PATH="$CUDNN_ROOT/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
# NCCL likewise: the toolkit's, else the nvidia-nccl wheel's.
if [ -z "${NCCL_ROOT:-}" ] && ! ls /usr/local/cuda/lib*/libnccl.so* >/dev/null 2>&1; then
  NCCL_ROOT=$(python3 -c "import nvidia.nccl as m; print(m.__path__[0])" 2>/dev/null || true)
fi
if [ -n "${NCCL_ROOT:-}" ]; then
  export NCCL_ROOT LD_LIBRARY_PATH="$NCCL_ROOT/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
# cuDNN dlopens its sub-libraries and NVRTC through the global search path, where the
# binaries' RUNPATH does not apply: the toolkit's lib64 goes on it too.
for dir in /usr/local/cuda/lib64 /usr/local/cuda/lib; do
  [ -d "$dir" ] && LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$dir"
done
export LD_LIBRARY_PATH

summary=()
status=0
limit=${GPU_CHECK_LIMIT:-560}
time_left() { echo $((limit - SECONDS)); }
# Runs a command with what is left of the time limit; 124 when the limit stopped it.
within_limit() {
  local rc=0
  timeout -k 15 "$(time_left)" "$@" || rc=$?
  [ "$rc" -eq 137 ] && rc=124
  return "$rc"
}
run_step() {  # name: runs do_<name> into the log, notes one summary line
  local name=$1 start=$SECONDS rc=0 note
  echo "===== gpu_check: $name" >>"$log"
  if [ "$(time_left)" -lt 30 ]; then
    echo "no time left before GPU_CHECK_LIMIT ($limit s)" >>"$log"
    rc=3
  else
    "do_$name" >>"$log" 2>&1 || rc=$?
  fi
  case $rc in
    0) note=ok ;;
    3) note="NOT RUN ($(tail -n 1 "$log"))" ;;
    124) note="STOPPED at GPU_CHECK_LIMIT ($limit s)" status=1 ;;
    *) note="FAILED (rc $rc)" status=1 ;;
  esac
  summary+=("gpu_check: $name: $note in $((SECONDS - start)) s")
  echo "===== gpu_check: $name: $note" >>"$log"
  return "$rc"
}
finish() {
  tail -n 40 "$log"
  echo "log: $log"
  printf '%s\n' "${summary[@]}"
  exit $status
}

do_build() {
  nvidia-smi -L || echo "nvidia-smi: no GPU listed"
  local cmake_version
  cmake_version=$(cmake --version | sed -n 's/^cmake version \([0-9.]*\).*/\1/p')
  if [ "$(printf '%s\n3.25\n' "$cmake_version" | sort -V | head -n 1)" != 3.25 ]; then
    echo "cmake $cmake_version is older than the 3.25 flaxpp needs: build elsewhere and carry" \
      "the binaries (bash scripts/gpu_pack.sh; docs/GPU.md)"
    return 1
  fi
  FLAXPP_BUILD_DIR=$build_dir bash scripts/build.sh -DFLAXPP_WITH_CUDA=ON -DFLAXPP_WITH_CUDNN=ON \
    -DCMAKE_CUDA_ARCHITECTURES=90 ${DEVDEPS_BLAS:+-DBLAS_LIBRARIES=$DEVDEPS_BLAS}
}

do_test() {
  local listed
  listed=$(ctest --test-dir "$build_dir" -N)
  for job in flaxpp_cuda_tests flaxpp_backend_tests_on_cuda flaxpp_check_refs_on_cuda; do
    grep -q " $job\$" <<<"$listed" || { echo "ctest does not list $job: CUDA was not built"; return 1; }
  done
  local output
  local rc=0
  output=$(FLAXPP_REQUIRE_CUDNN=1 within_limit ctest --test-dir "$build_dir" --output-on-failure \
    -j "$(nproc)" 2>&1) || rc=$?
  echo "$output"
  [ "$rc" -eq 124 ] && return 124
  [ "$rc" -eq 0 ] || return 1
  # On a GPU machine a skipped CUDA job means the GPU was not seen: that is a failure here.
  # Other jobs may skip for their own reasons (flaxpp_refs_format_copy without ../shared).
  if grep -E "(cuda|kernel_bench).*\(Skipped\)" <<<"$output"; then
    echo "CUDA jobs were SKIPPED: the tests saw no GPU"
    return 1
  fi
}

do_refs() {
  within_limit "$build_dir/src/flaxpp" check --device cuda tests/refs/*.json
}

do_bench() {
  local rc=0
  # Each kernel launcher alone first (seconds): one JSON line each, kept beside the table.
  within_limit "$build_dir/tests/flaxpp_kernel_bench" | tee "$out/kernel_bench.jsonl" || rc=$?
  [ "$rc" -eq 0 ] || return "$rc"
  FLAXPP_BUILD_DIR=$build_dir FLAXPP_BENCH_PYTHON=${FLAXPP_BENCH_PYTHON:-python3} \
    within_limit bash scripts/bench.sh --no-build --gpu || rc=$?
  [ "$rc" -eq 0 ] || return "$rc"
  cp docs/bench/gpu/table.md docs/bench/gpu/*.png "$out"/ 2>/dev/null
  cat docs/bench/gpu/table.md
}

sanitizer="" deadline=0 args=()
do_memcheck() {
  local cuda_bin candidate probe
  cuda_bin=$(dirname "$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)")
  sanitizer=$(command -v compute-sanitizer)
  for candidate in "$cuda_bin/compute-sanitizer" "$cuda_bin/../compute-sanitizer/compute-sanitizer" \
    $(find /usr/local/cuda* /opt/nvidia -maxdepth 4 -name compute-sanitizer -type f 2>/dev/null); do
    [ -z "$sanitizer" ] && [ -x "$candidate" ] && sanitizer=$candidate
  done
  if [ -z "$sanitizer" ]; then
    echo "compute-sanitizer not found (looked on PATH, beside nvcc, under /usr/local/cuda* and /opt/nvidia)"
    return 3
  fi
  # API errors that tests provoke on purpose (an impossible allocation) are not memory errors.
  args=(--tool memcheck --report-api-errors no --error-exitcode 1)
  probe=$("$sanitizer" "${args[@]}" "$build_dir/tests/flaxpp_cuda_tests" -tc='CUDA: report*' 2>&1)
  echo "$probe"
  if grep -qiE "device not supported|error 999|unable to (start|initialize)" <<<"$probe"; then
    echo "compute-sanitizer cannot run on this device: $(grep -iE -m1 'not supported|999|unable' <<<"$probe")"
    return 3
  fi
  # The suites under the sanitizer share a time budget (the machine's commands end at 10
  # minutes, and a fresh machine spends some of them building): a suite cut short by it is
  # reported as such, with whether the sanitizer had reported anything until then.
  # The budget ends MEMCHECK_SECONDS from now, or earlier at the command's limit.
  deadline=$((SECONDS + ${MEMCHECK_SECONDS:-360}))
  [ "$deadline" -gt $((limit - 20)) ] && deadline=$((limit - 20))
  local rc=0
  # NCCL's set-up under the sanitizer is slow and reports NCCL's own internals.
  memcheck_suite flaxpp_cuda_tests -tce='*(large)*,NCCL*' || rc=1
  FLAXPP_DEVICE=cuda memcheck_suite flaxpp_optim_tests || rc=1
  return "$rc"
}
memcheck_suite() {  # suite, doctest arguments...: under the sanitizer within the time left
  local name=$1 left=$((deadline - SECONDS)) rc=0
  shift
  if [ "$left" -le 10 ]; then
    echo "memcheck: no time left for $name"
    return 1
  fi
  timeout -k 15 "$left" "$sanitizer" "${args[@]}" "$build_dir/tests/$name" "$@" \
    >"$out/memcheck-$name.log" 2>&1 || rc=$?
  tail -n 15 "$out/memcheck-$name.log"
  if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
    echo "memcheck: $name cut short by MEMCHECK_SECONDS; errors the sanitizer reported until" \
      "then: $(grep -c '^========= \(Invalid\|Error\|Program hit\)' "$out/memcheck-$name.log")"
  fi
  return "$rc"
}

# Every command builds first (incrementally on a warm machine); nothing runs on a failed build.
run_step build || finish
for step in "${steps[@]}"; do
  [ "$step" = build ] || run_step "$step"
done
finish
