#!/usr/bin/env bash
# The GPU bundle as a lent GPU machine will meet it (docs/GPU.md): scripts/gpu_pack.sh builds
# the carry configuration in BUILD_DIR/carry, packs BUILD_DIR/gpu-carry and passes its dry run;
# then, on this machine without a GPU, gpu_run.sh says so in one line and exits 3, a bundle
# whose tree has changed is refused, and an --only that matches nothing is refused.
# Usage: test_gpu_bundle.sh REPOSITORY_ROOT BUILD_DIR
set -uo pipefail
root=$1 build=$2
export FLAXPP_CARRY_BUILD_DIR=$build/carry FLAXPP_CARRY_OUT=$build/gpu-carry
export GPU_RUN_DIR=$build/gpu-run FLAXPP_TREE=$root OUT=$build/gpu-run-out
fail() { echo "FAIL: $*"; exit 1; }

bash "$root/scripts/gpu_pack.sh" || fail "gpu_pack.sh failed"
run=$FLAXPP_CARRY_OUT/gpu_run.sh
[ "$(ls "$FLAXPP_CARRY_OUT")" = "$(printf 'bundle.tar.xz\ngpu_run.sh')" ] ||
  fail "the carried folder holds more than the archive and the run script: $(ls "$FLAXPP_CARRY_OUT")"
size=$(stat -c %s "$FLAXPP_CARRY_OUT/bundle.tar.xz")
[ "$size" -lt $((48 * 1024 * 1024)) ] || fail "the archive takes $size bytes, over 48 MiB"
[ "$(find "$OUT" -type f | wc -l)" -le 8 ] || fail "the dry run left more than 8 files in \$OUT"

if nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
  echo "a GPU is visible here: the no-GPU checks do not apply"
else
  output=$(bash "$run" 2>&1)
  rc=$?
  [ "$rc" -eq 3 ] || fail "without a GPU gpu_run.sh exited $rc, not 3: $output"
  [ "$(wc -l <<<"$output")" -eq 1 ] && grep -q "no NVIDIA GPU is visible" <<<"$output" ||
    fail "without a GPU gpu_run.sh should say so in one line, said: $output"
fi

output=$(bash "$run" --dry-run --only 'no such item' 2>&1)
[ $? -eq 2 ] && grep -q "no item matches" <<<"$output" || fail "--only matching nothing: $output"

# A tree that changed after packing is refused (a copy of the tree, one source file edited).
copy=$build/gpu-tree-copy
rm -rf "$copy"
mkdir -p "$copy"
git -C "$root" ls-files -co --exclude-standard -z | (cd "$root" && xargs -0 cp --parents -t "$copy")
echo "// changed after packing" >>"$copy/src/core/array.cpp"
output=$(FLAXPP_TREE=$copy bash "$run" --dry-run 2>&1)
rc=$?
rm -rf "$copy"
[ "$rc" -eq 2 ] && grep -q "src/core/array.cpp (changed)" <<<"$output" ||
  fail "a changed tree was not refused (rc $rc): $output"
echo "gpu bundle: packed ($((size / 1024)) KiB), dry run passed, no-GPU and stale-tree refusals hold"
