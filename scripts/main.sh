#!/usr/bin/env bash
# The main job: build flaxpp and check it against every committed reference case from real
# JAX/Flax (on the GPU when there is one, else on the CPU).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
exec "${FLAXPP_BUILD_DIR:-build}/src/flaxpp" check tests/refs/*.json
