#!/usr/bin/env bash
# Installs flaxpp from a build folder into a temporary prefix, builds examples/quickstart.cpp
# as another project would (tests/package/CMakeLists.txt: find_package(flaxpp), link
# flaxpp::flaxpp) and runs it on the CPU: the package finds its dependencies, exports every
# layer library, and registers the backends in a program that only links it.
#   test_package.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1 source=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$build" --prefix "$work/prefix" >/dev/null
cmake -S "$source/tests/package" -B "$work/consumer" -DCMAKE_PREFIX_PATH="$work/prefix" \
  -DFLAXPP_QUICKSTART="$source/examples/quickstart.cpp" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$work/consumer" -j 2 >/dev/null
FLAXPP_DEVICE=cpu "$work/consumer/consumer"
