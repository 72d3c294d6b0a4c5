#!/usr/bin/env bash
# Builds what the GPU machine runs, here on a CPU machine with the CUDA toolkit, and packs it
# into .gpu-carry/ (git-ignored): bundle.tar.xz and gpu_run.sh, the one command to run there
# (docs/GPU.md). The build is a Release build for Hopper (sm_90) in its own folder, without MPI
# and cairo, libstdc++ dynamic, so that it loads on the GPU machine's image; incremental (and
# through ccache where installed), so a one-file change repacks in minutes. Before it finishes
# it checks what can be checked without a GPU: every library resolves with the bundle's loader
# path, no symbol newer than GLIBC 2.34, sm_90 code in every fatbin, and (gpu_run.sh --dry-run)
# every suite lists its cases and every job starts.
#
#   bash scripts/gpu_pack.sh            # then, on the GPU machine: bash .gpu-carry/gpu_run.sh
#
# FLAXPP_CARRY_BUILD_DIR (default build-carry) and FLAXPP_CARRY_OUT (default .gpu-carry) move
# the build and the bundle; extra arguments go to the CMake configure step.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/deps.sh
flaxpp_install_deps

build_dir=${FLAXPP_CARRY_BUILD_DIR:-build-carry}
out=${FLAXPP_CARRY_OUT:-.gpu-carry}
start=$SECONDS
if ! command -v nvcc >/dev/null && [ ! -x /usr/local/cuda/bin/nvcc ]; then
  echo "gpu_pack: needs the CUDA toolkit (nvcc, cuBLAS, cuDNN, NCCL) to build the bundle;" \
    "none found on PATH or in /usr/local/cuda" >&2
  exit 1
fi
launcher=()
if command -v ccache >/dev/null; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
  export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD}
fi
cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DFLAXPP_WITH_CUDA=ON -DFLAXPP_WITH_CUDNN=ON -DFLAXPP_WITH_NCCL=ON -DFLAXPP_WITH_MPI=OFF \
  -DCMAKE_DISABLE_FIND_PACKAGE_PkgConfig=ON "${launcher[@]}" "$@" | { grep '^-- flaxpp:' || true; }
cmake --build "$build_dir" -j "$(nproc)"
echo "gpu_pack: built in $((SECONDS - start)) s"
python3 scripts/gpu/pack.py --build "$build_dir" --out "$out"
FLAXPP_TREE=$PWD bash "$out/gpu_run.sh" --dry-run
echo "gpu_pack: done in $((SECONDS - start)) s; on the GPU machine: bash $out/gpu_run.sh"
