#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Runs $VTEST_BINARY with $VTEST_RANK0_ENV (NAME=VALUE, several separated by spaces) set on Open MPI's rank 0
# only: for tests of settings that differ between ranks. Passed to run-mpi-test.sh as the program.
if [ "${OMPI_COMM_WORLD_RANK:-0}" = 0 ]; then
    for assignment in $VTEST_RANK0_ENV; do export "$assignment"; done
fi
exec "$VTEST_BINARY" "$@"
