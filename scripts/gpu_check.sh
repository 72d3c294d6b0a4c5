#!/usr/bin/env bash
# The GPU verification of the CUDA backend, for a machine with an NVIDIA GPU, the CUDA toolkit
# and python3 with JAX but possibly no package registry. Each step's output goes to
# ${GPU_CHECK_OUT:-build-gpu/check}/<step>.log, and a summary line per step is printed.
#
#   bash scripts/gpu_check.sh [build] [test] [memcheck] [bench]   (default: build test memcheck)
#
#   build     configure and build for Hopper (sm_90) into ${FLAXPP_BUILD_DIR:-build-gpu}
#   test      ctest: every suite, including the *_on_cuda reruns, flaxpp_cuda_tests and
#             `flaxpp check --device cuda` over the reference cases (none may be skipped)
#   memcheck  compute-sanitizer --tool memcheck over the CUDA suite and the optim suite on CUDA
#   bench     scripts/bench.sh --gpu: flaxpp and JAX side by side in bf16, into docs/bench/gpu/
#
# Debian packages: where `.device/setup.sh` exists (made by ../shared/device/pack.sh), it
# provides them and apt is not used. cuDNN is found in the CUDA toolkit or, failing that, in
# the nvidia-cudnn Python wheel.
# shellcheck disable=SC2317  # the do_* steps are called through run_step
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1

steps=("$@")
[ ${#steps[@]} -eq 0 ] && steps=(build test memcheck)
build_dir=${FLAXPP_BUILD_DIR:-build-gpu}
out=${GPU_CHECK_OUT:-$build_dir/check}
mkdir -p "$out"

if [ -f .device/setup.sh ]; then
  # shellcheck disable=SC1091
  source .device/setup.sh
  export FLAXPP_NO_APT=1
fi
if [ -z "${CUDNN_ROOT:-}" ]; then
  CUDNN_ROOT=$(python3 -c "import nvidia.cudnn as m; print(m.__path__[0])" 2>/dev/null || true)
  export CUDNN_ROOT
fi

status=0
run_step() {  # name, command...: runs it into its log, prints one line
  local name=$1
  shift
  local start=$SECONDS rc=0
  "$@" >"$out/$name.log" 2>&1 || rc=$?
  echo "gpu_check: $name: $([ $rc -eq 0 ] && echo ok || echo "FAILED (rc $rc)") in" \
    "$((SECONDS - start)) s; log $out/$name.log"
  tail -n 5 "$out/$name.log" | sed 's/^/    /'
  [ $rc -eq 0 ] || status=1
}

do_build() {
  FLAXPP_BUILD_DIR=$build_dir bash scripts/build.sh -DFLAXPP_WERROR=ON \
    -DCMAKE_CUDA_ARCHITECTURES=90 ${DEVDEPS_BLAS:+-DBLAS_LIBRARIES=$DEVDEPS_BLAS}
}
do_test() {
  nvidia-smi -L || true
  ctest --test-dir "$build_dir" --output-on-failure -j 4 | tee "$out/ctest_output.txt"
  [ "${PIPESTATUS[0]}" -eq 0 ] || return 1
  # On a GPU machine a skipped CUDA job means the GPU was not seen: that is a failure here.
  if grep -q "(Skipped)" "$out/ctest_output.txt"; then
    echo "some CUDA jobs were skipped: no GPU visible to the tests"
    return 1
  fi
}
do_memcheck() {
  local sanitizer rc=0 cuda_bin candidate
  cuda_bin=$(dirname "$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)")
  sanitizer=$(command -v compute-sanitizer)
  for candidate in "$cuda_bin/compute-sanitizer" "$cuda_bin/../compute-sanitizer/compute-sanitizer"; do
    [ -z "$sanitizer" ] && [ -x "$candidate" ] && sanitizer=$candidate
  done
  if [ -z "$sanitizer" ]; then
    echo "compute-sanitizer not found (the CUDA toolkit ships it in bin/ or compute-sanitizer/)"
    return 1
  fi
  "$sanitizer" --tool memcheck --error-exitcode 1 "$build_dir/tests/flaxpp_cuda_tests" || rc=1
  FLAXPP_DEVICE=cuda "$sanitizer" --tool memcheck --error-exitcode 1 \
    "$build_dir/tests/flaxpp_optim_tests" || rc=1
  return "$rc"
}
do_bench() {
  FLAXPP_BUILD_DIR=$build_dir FLAXPP_BENCH_PYTHON=${FLAXPP_BENCH_PYTHON:-python3} \
    bash scripts/bench.sh --gpu
}

for step in "${steps[@]}"; do
  case $step in
    build | test | memcheck | bench) run_step "$step" "do_$step" ;;
    *)
      echo "gpu_check: unknown step \"$step\"; the steps are build, test, memcheck, bench" >&2
      exit 2
      ;;
  esac
done
exit $status
