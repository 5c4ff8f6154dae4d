#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Configures (once) and builds vccl in BUILD_DIR (default: build/). Extra arguments go to configure.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$top/build}
jobs=${JOBS:-$(nproc)}
cd "$top"
[ -x configure ] || ./autogen.sh
mkdir -p "$build"
cd "$build"
[ -f Makefile ] || "$top/configure" "$@"
make -j"$jobs"
