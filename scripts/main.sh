#!/usr/bin/env bash
# The main job: build flaxpp and train the digits classifier (examples/digits.json), ending
# with "test accuracy: 0.NNNN". flaxpp's compute runs on the CPU for now (the CUDA compute
# path is an open issue); FLAXPP_DEVICE has no effect on training yet.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
exec "${FLAXPP_BUILD_DIR:-build}/src/flaxpp" train examples/digits.json
