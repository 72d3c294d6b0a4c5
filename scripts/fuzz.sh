#!/usr/bin/env bash
# Builds the libFuzzer targets of tests/fuzz (clang, ASan+UBSan) and runs them: each target
# with its dictionary, its committed seeds (tests/fuzz/corpus/<name>, read only) and a working
# corpus that grows as it finds new inputs. Crashing inputs land in <build>/fuzz/crashes/<name>/;
# replay one with <build>/tests/fuzz/fuzz_<name> FILE. Installs clang when it is missing.
#
#   bash scripts/fuzz.sh [--time SECONDS | --runs N] [--no-build] [TARGET...]
#
#   --time S     run each target for S seconds (default 15: the CI smoke run)
#   --runs N     run each target for N executions instead (the long runs: --runs 10000000)
#   --no-build   use the build as it is (CI builds the fuzzers with its sanitizer suites)
#   TARGET       json, refs, safetensors, ... (default: every tests/fuzz/fuzz_*.cpp), one after
#                the other; run two scripts side by side to use two cores
#
# The build goes to ${FLAXPP_BUILD_DIR:-build-fuzz} (RelWithDebInfo, for speed). A target fails
# the script when libFuzzer reports a crash, a leak, a sanitizer error, an unit slower than 10 s
# or a single allocation or RSS above 2 GB; each target prints its executions and corpus size.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/deps.sh

limit=(-max_total_time=15)
build=1
targets=()
while [ "$#" -gt 0 ]; do
  case "$1" in
    --time) limit=(-max_total_time="$2"); shift 2 ;;
    --runs) limit=(-runs="$2"); shift 2 ;;
    --no-build) build=0; shift ;;
    -h|--help) sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "fuzz.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) targets+=("$1"); shift ;;
  esac
done
if [ "${#targets[@]}" -eq 0 ]; then
  for f in tests/fuzz/fuzz_*.cpp; do
    name=$(basename "$f" .cpp)
    targets+=("${name#fuzz_}")
  done
fi

build_dir=${FLAXPP_BUILD_DIR:-build-fuzz}
if [ "$build" -eq 1 ]; then
  flaxpp_install_deps
  flaxpp_install_deps "${FLAXPP_FUZZ_APT_PACKAGES[@]}"
  CXX=${FLAXPP_FUZZ_CXX:-clang++} cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DFLAXPP_FUZZ=ON -DFLAXPP_WITH_CUDA=OFF >/dev/null
  cmake --build "$build_dir" -j "$(nproc)" --target flaxpp_fuzzers
fi

failed=()
for name in "${targets[@]}"; do
  binary="$build_dir/tests/fuzz/fuzz_$name"
  [ -x "$binary" ] || { echo "fuzz.sh: no fuzz target $binary (built with -DFLAXPP_FUZZ=ON?)" >&2; exit 2; }
  work="$build_dir/fuzz/corpus/$name" crashes="$build_dir/fuzz/crashes/$name"
  mkdir -p "$work" "$crashes"
  dict=()
  [ -f "tests/fuzz/$name.dict" ] && dict=(-dict="tests/fuzz/$name.dict")
  log="$build_dir/fuzz/$name.log"
  echo "== fuzz_$name (${limit[*]})"
  start=$(date +%s)
  if "$binary" "${limit[@]}" "${dict[@]}" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
      -artifact_prefix="$crashes/" "$work" "tests/fuzz/corpus/$name" >"$log" 2>&1; then
    status=ok
  else
    status=FAILED
    failed+=("$name")
    tail -n 40 "$log"
  fi
  execs=$(grep -Eo 'stat::number_of_executed_units: *[0-9]+' "$log" | grep -Eo '[0-9]+$' || echo "?")
  corpus=$(tr '\r' '\n' <"$log" | grep -Eo 'corp: [0-9]+/[0-9]+[a-zA-Z]*' | tail -n 1 | cut -c7- || true)
  echo "   $status: $execs executions in $(($(date +%s) - start)) s; corpus ${corpus:-?} (inputs/size)," \
       "$(find "$work" -type f | wc -l) files kept in $work; log $log"
done
if [ "${#failed[@]}" -gt 0 ]; then
  echo "fuzz.sh: ${failed[*]} found a problem; the inputs are in $build_dir/fuzz/crashes/" >&2
  exit 1
fi
