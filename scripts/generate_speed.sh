#!/usr/bin/env bash
# The sampling speed of `flaxpp generate` with and without the key-value cache, for
# generations that fill the model's context: trains examples/lm.json's model (seq_len 64) and
# the same model with seq_len 256 for a few steps each (the speed does not depend on the
# weights), then runs RUNS alternating pairs (default 9) of `generate --timing` with the prompt
# "In the beginning" and seq_len - 16 characters, and prints the median characters per second
# of each side (min-max) and the median of the pairs' ratios. Needs a build (scripts/build.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-9}
flaxpp=${FLAXPP_BUILD_DIR:-build}/src/flaxpp
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
median() { sort -g | awk '{a[NR]=$1} END {printf "%.4g (%.4g-%.4g)", a[int((NR+1)/2)], a[1], a[NR]}'; }
rate() { "$flaxpp" generate "$@" --timing 2>&1 >/dev/null | sed -n 's/.*s (\([0-9.e+]*\) characters\/s.*/\1/p'; }
for seq_len in 64 256; do
  sed -e "s#\"seq_len\": 64#\"seq_len\": $seq_len#" -e "s#runs/lm#$work/lm$seq_len#" \
    -e "s#data/genesis.txt#$PWD/data/genesis.txt#" examples/lm.json >"$work/lm$seq_len.json"
  "$flaxpp" train "$work/lm$seq_len.json" --max-steps 5 >"$work/train.log" 2>&1 ||
    { cat "$work/train.log" >&2; exit 1; }
  checkpoint=$work/lm$seq_len/checkpoint.json
  : >"$work/cached" && : >"$work/window"
  for i in $(seq "$runs"); do
    args=("$checkpoint" --prompt "In the beginning" --tokens $((seq_len - 16)) --seed "$i")
    rate "${args[@]}" >>"$work/cached"
    rate "${args[@]}" --no-kv-cache >>"$work/window"
  done
  printf 'seq_len %s, %s characters: with the cache %s characters/s, without %s, ratio %s\n' \
    "$seq_len" $((seq_len - 16)) "$(median <"$work/cached")" "$(median <"$work/window")" \
    "$(paste "$work/cached" "$work/window" | awk '{print $1 / $2}' | median)"
done
