#!/usr/bin/env bash
# Installs flaxpp from a build folder into a temporary prefix and builds, as another project
# would (tests/package/CMakeLists.txt: find_package(flaxpp)), examples/quickstart.cpp linking
# flaxpp::flaxpp, a user's own check program linking flaxpp::tools, and a program including
# every installed header. Runs the quickstart on the CPU (the package finds its dependencies,
# exports every layer library, and registers the backends in a program that only links it),
# then the check program on its JAX cases, as `flaxpp check` runs.
#   test_package.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1 source=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$build" --prefix "$work/prefix" >/dev/null
cmake -S "$source/tests/package" -B "$work/consumer" -DCMAKE_PREFIX_PATH="$work/prefix" \
  -DFLAXPP_QUICKSTART="$source/examples/quickstart.cpp" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$work/consumer" -j 2 >/dev/null
quickstart=$(FLAXPP_DEVICE=cpu "$work/consumer/consumer")
echo "$quickstart"
grep -q 'grad b f32\[4\]' <<<"$quickstart" || { echo "the quickstart printed no gradient"; exit 1; }
"$work/consumer/all_headers"

# The user check program: its cases pass; a wrong expected value fails as in flaxpp check.
cases=$source/tests/package/user_check.json
out=$("$work/consumer/user_check" "$cases" --device cpu)
[ "$out" = "6 passed, 0 failed" ] || { echo "user_check: $out"; exit 1; }
sed 's/"data": \[-2.3250308,/"data": [-2.3,/' "$cases" >"$work/wrong.json"
set +e
out=$("$work/consumer/user_check" "$work/wrong.json" --device cpu)
rc=$?
set -e
[ "$rc" -eq 1 ] && grep -q '^FAIL  affine_gelu/0' <<<"$out" && grep -q "^5 passed, 1 failed$" <<<"$out" ||
  { echo "user_check on a wrong case: exit $rc: $out"; exit 1; }
"$work/consumer/user_check" --help | grep -q "^usage: .*user_check FILE\.\.\." ||
  { echo "user_check --help does not name the program"; exit 1; }
echo "user check: 6 passed, 0 failed"
