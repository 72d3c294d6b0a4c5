#!/usr/bin/env bash
# The GPU verdict in one command, on the GPU machine, from the bundle that scripts/gpu_pack.sh
# made (docs/GPU.md): unpacks .gpu-carry/bundle.tar.xz and runs every CUDA job, memcheck and
# the benchmarks beside JAX, ending with a summary table and one PASS/FAIL line. Needs only
# python3 there (with JAX for the benchmarks' JAX side); nothing is built.
#
#   bash .gpu-carry/gpu_run.sh                    # everything, within 540 s
#   bash .gpu-carry/gpu_run.sh --only cuda_tests --tc 'CUDA dot_general*'   # a rerun
#   bash .gpu-carry/gpu_run.sh --phase A --refs my_refs/                    # tests, more refs
#   bash .gpu-carry/gpu_run.sh --dry-run          # no GPU: checks the bundle, exits 0 if sound
#
# Logs and tables go to $OUT when it is set (at most 8 files), else beside the unpacked bundle.
# GPU_RUN_DIR (default ${TMPDIR:-/tmp}/flaxpp-gpu-run) is where the bundle is unpacked.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# Run as .gpu-carry/gpu_run.sh (the bundle beside it) or as scripts/gpu_run.sh (the tree's).
carry=$here
[ -f "$carry/bundle.tar.xz" ] || carry=$(dirname "$here")/.gpu-carry
# The tree it was carried with: the folder holding .gpu-carry/, unless FLAXPP_TREE names it.
tree=${FLAXPP_TREE:-$(dirname "$carry")}
if [ ! -f "$carry/bundle.tar.xz" ]; then
  echo "gpu_run: no bundle at $carry/bundle.tar.xz: run 'bash scripts/gpu_pack.sh' on a machine" \
    "with the CUDA toolkit, then carry .gpu-carry/ with the tree" >&2
  exit 2
fi
command -v python3 >/dev/null || { echo "gpu_run: needs python3" >&2; exit 2; }
unpack=${GPU_RUN_DIR:-${TMPDIR:-/tmp}/flaxpp-gpu-run}
rm -rf "$unpack"
mkdir -p "$unpack"
python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' \
  "$carry/bundle.tar.xz" "$unpack"
exec python3 "$unpack/bundle/gpu/run.py" --bundle "$unpack/bundle" --tree "$tree" "$@"
