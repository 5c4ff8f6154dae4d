#!/bin/sh
# Runs $VTEST_BINARY with $VTEST_RANK0_ENV (NAME=VALUE) set on Open MPI's rank 0 only: for tests of settings
# that differ between ranks. Passed to run-mpi-test.sh as the program.
if [ "${OMPI_COMM_WORLD_RANK:-0}" = 0 ]; then export "$VTEST_RANK0_ENV"; fi
exec "$VTEST_BINARY" "$@"
