# Shell checks for the tests that run flaxpp's programs (tests/cli/test_cli.sh,
# tests/dist/test_dist_train.sh): source it, call check, end with checks_summary.
passed=0 failed=0

check() {  # check NAME command...: passes when the command succeeds; its output shows on failure
  local name=$1 out
  shift
  if out=$("$@" 2>&1); then
    passed=$((passed + 1))
  else
    failed=$((failed + 1))
    printf 'FAIL %s\n' "$name"
    [ -n "$out" ] && printf '%s\n' "$out"
  fi
  return 0
}

checks_summary() {  # the summary line; fails when a check failed
  echo "$passed passed, $failed failed"
  [ "$failed" -eq 0 ]
}
