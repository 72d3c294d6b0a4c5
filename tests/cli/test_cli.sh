#!/usr/bin/env bash
# The flaxpp command line as a user meets it: exit codes, summary lines and error messages of
# `flaxpp check` and `flaxpp residuals`. Usage: test_cli.sh path/to/flaxpp
set -u
flaxpp=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
passed=0 failed=0

expect() {  # expect NAME EXIT_CODE PATTERN -- command...
  local name=$1 code=$2 pattern=$3
  shift 4
  local out rc
  out=$("$@" 2>&1)
  rc=$?
  if [ "$rc" -eq "$code" ] && grep -qE -- "$pattern" <<<"$out"; then
    passed=$((passed + 1))
  else
    failed=$((failed + 1))
    printf 'FAIL %s: exit %s (want %s), output:\n%s\n' "$name" "$rc" "$code" "$out"
  fi
}

good='{"id": "k0", "problem": "random.key", "inputs": {"seed": 0}, "expected": {"dtype": "uint32", "shape": [2], "data": [0, 0]}}'
bad='{"id": "k1", "problem": "random.key", "inputs": {"seed": 1}, "expected": {"dtype": "uint32", "shape": [2], "data": [0, 2]}}'
printf '{"format": "flaxpp.refs/1", "cases": [%s]}' "$good" >"$dir/good.json"
printf '{"format": "flaxpp.refs/1", "cases": [%s, %s]}' "$good" "$bad" >"$dir/mixed.json"
printf '{"format": "flaxpp.refs/1", "cases": [%s' "$good" >"$dir/truncated.json"
printf '{"format": "flaxpp.refs/2", "cases": []}' >"$dir/other_format.json"
printf '{"format": "flaxpp.refs/1", "cases": [{"id": "n", "problem": "random.uniform", "inputs": {"key": {"dtype": "uint32", "shape": [2], "data": [0, 0]}, "shape": [1], "maxval": 1e400}, "expected": 0}]}' >"$dir/huge_number.json"

expect "all pass" 0 '^1 passed, 0 failed$' -- "$flaxpp" check "$dir/good.json"
expect "a failing case" 1 '^1 passed, 1 failed$' -- "$flaxpp" check "$dir/mixed.json"
expect "the failing case is named" 1 'FAIL  k1' -- "$flaxpp" check "$dir/mixed.json"
expect "verbose lists passes" 1 '^ok    k0$' -- "$flaxpp" check --verbose "$dir/mixed.json"
expect "truncated JSON" 2 'truncated.json:1:[0-9]+: not valid JSON' -- "$flaxpp" check "$dir/truncated.json" "$dir/good.json"
expect "other files still run" 2 '^1 passed, 0 failed$' -- "$flaxpp" check "$dir/truncated.json" "$dir/good.json"
expect "another format" 2 '\$\.format: expected "flaxpp.refs/1"' -- "$flaxpp" check "$dir/other_format.json"
expect "a number beyond double range" 2 'not valid JSON' -- "$flaxpp" check "$dir/huge_number.json"
expect "a missing file" 2 'cannot open' -- "$flaxpp" check "$dir/nope.json"
expect "no files" 2 'no reference files given' -- "$flaxpp" check
expect "unknown option" 2 'unknown option --fast' -- "$flaxpp" check --fast "$dir/good.json"
expect "bad device" 2 'unknown device "tpu"' -- "$flaxpp" check --device tpu "$dir/good.json"
expect "unknown command" 2 'unknown command "chek"' -- "$flaxpp" chek
expect "residuals" 0 'f32\[5,4\] output of dot_general' -- "$flaxpp" residuals checkpoint_dot_policy --policy dots_saveable
expect "residuals, named" 0 "named 'a'" -- "$flaxpp" residuals named_dot_policy --policy '{"name": "save_only_these_names", "names": ["a"]}'
expect "residuals, bad policy" 2 'unknown checkpoint policy' -- "$flaxpp" residuals checkpoint_dot_policy --policy dots_savable

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
