#!/usr/bin/env bash
# Configures and builds flaxpp (Release) into ${FLAXPP_BUILD_DIR:-build}, installing missing
# Debian packages first. Extra arguments go to the CMake configure step.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/deps.sh
flaxpp_install_deps

build_dir=${FLAXPP_BUILD_DIR:-build}
cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
cmake --build "$build_dir" -j "$(nproc)"
