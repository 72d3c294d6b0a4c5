#!/usr/bin/env bash
# The main job: build flaxpp and train the digits classifier (examples/digits.json) from scratch
# (--fresh: each run replaces the previous one in runs/digits), ending with
# "test accuracy: 0.NNNN". The config's device is "auto": the GPU when one is present, else the
# CPU (FLAXPP_DEVICE=cpu|cuda overrides).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
exec "${FLAXPP_BUILD_DIR:-build}/src/flaxpp" train examples/digits.json --fresh
