#!/usr/bin/env bash
# Installs the Debian packages flaxpp builds with, if any are missing. Sourced by the other
# scripts; safe to run again. As root it installs them; otherwise it prints the exact
# apt-get line to run and stops.
set -euo pipefail

# libcairo2-dev: the curves flaxpp train draws (optional to CMake; installed here so that every
# README command draws them). Open MPI: multi-process jobs (optional to CMake; the tests run
# two-process jobs). libdnnl-dev: oneDNN, for float32 products on the CPU (optional to CMake,
# which falls back to OpenBLAS).
FLAXPP_APT_PACKAGES=(cmake g++ make pkg-config nlohmann-json3-dev doctest-dev libopenblas-dev
  libdnnl-dev libcairo2-dev libopenmpi-dev openmpi-bin)
# The fuzz targets (tests/fuzz, scripts/fuzz.sh) need clang and its libFuzzer and sanitizer
# runtimes.
FLAXPP_FUZZ_APT_PACKAGES=(clang libclang-rt-14-dev)

flaxpp_missing_packages() {  # flaxpp_missing_packages PACKAGE...
  local missing=() p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  echo "${missing[@]:-}"
}

flaxpp_install_deps() {  # flaxpp_install_deps [PACKAGE...] (default: FLAXPP_APT_PACKAGES)
  # Set where the packages come from elsewhere (scripts/gpu_check.sh with .device/).
  [ -n "${FLAXPP_NO_APT:-}" ] && return 0
  local missing
  if [ "$#" -eq 0 ]; then set -- "${FLAXPP_APT_PACKAGES[@]}"; fi
  missing=$(flaxpp_missing_packages "$@")
  [ -z "$missing" ] && return 0
  if [ "$(id -u)" -ne 0 ]; then
    echo "flaxpp needs these Debian packages: $missing" >&2
    echo "Install them as root, then run this command again:" >&2
    echo "  sudo apt-get update && sudo apt-get install -y --no-install-recommends $missing" >&2
    exit 1
  fi
  echo "Installing missing packages: $missing"
  # shellcheck disable=SC2086
  DEBIAN_FRONTEND=noninteractive apt-get update -qq &&
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing >/dev/null
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  flaxpp_install_deps
fi
