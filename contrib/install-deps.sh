#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Installs what vccl needs to build and test on Debian 12 (or Ubuntu): compilers, autotools, UCX, hwloc,
# ibverbs, Open MPI with devel headers, MPICH beside it (the PMPI interposer is built and tested for both), GoogleTest, pandoc, iproute2, python3 (the launch-script tests), clang with libFuzzer for tests/fuzz, libmicrohttpd (vccl-telemetry serve) and prometheus (the test that scrapes it). Needs root (or sudo).
set -euo pipefail
packages=(
  build-essential autoconf automake libtool pkg-config
  libucx-dev ucx-utils libhwloc-dev libibverbs-dev
  libopenmpi-dev openmpi-bin
  mpich libmpich-dev
  libgtest-dev
  libmicrohttpd-dev prometheus
  pandoc iproute2 procps python3
  clang libclang-rt-dev
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all packages present"
  exit 0
fi
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
echo "install-deps: installing ${missing[*]}"
$SUDO apt-get update -q
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
