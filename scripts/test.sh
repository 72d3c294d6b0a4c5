#!/usr/bin/env bash
# Builds flaxpp with warnings as errors and runs every test suite (ctest).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh -DFLAXPP_WERROR=ON "$@"
ctest --test-dir "${FLAXPP_BUILD_DIR:-build}" --output-on-failure -j "$(nproc)"
