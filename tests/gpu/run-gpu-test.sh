#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Runs a device-memory test program under mpirun when a GPU is usable: run-gpu-test.sh NP BINARY [args...]
# Without one it prints why and exits 77, which automake counts as skipped (CI machines have no GPU).
here=$(dirname "$0")
probe=${top_builddir:-.}/tests/gpu/gpu_probe
if ! out=$("$probe" 2>&1); then
    echo "SKIP: $out (the device-memory tests need a GPU; run them with make check-gpu on a GPU machine)"
    exit 77
fi
echo "$out"
exec "$here/../mpi/run-mpi-test.sh" "$@"
