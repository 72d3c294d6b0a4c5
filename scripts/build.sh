#!/usr/bin/env bash
# Configures and builds flaxpp (Release) into ${FLAXPP_BUILD_DIR:-build}, installing missing
# Debian packages first. Extra arguments go to the CMake configure step.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/deps.sh
flaxpp_install_deps

build_dir=${FLAXPP_BUILD_DIR:-build}
# The configure summary ("flaxpp: CUDA backend ..., cuDNN ...") is shown; the rest of
# CMake's chatter is not (errors and warnings go to stderr and are).
cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=Release "$@" | { grep '^-- flaxpp:' || true; }
cmake --build "$build_dir" -j "$(nproc)"
