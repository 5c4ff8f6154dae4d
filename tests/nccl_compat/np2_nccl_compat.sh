#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Listed in tests/nccl_compat/Makefile.inc: test_nccl_compat on 2 ranks. Rank 0 hands the NCCL unique id
# to rank 1 through a file (the test links no MPI library; mpirun only launches it).
dir=$(mktemp -d "${TMPDIR:-/tmp}/vccl-nccl-test.XXXXXX") || exit 99
trap 'rm -rf "$dir"' EXIT
VCCL_NCCL_TEST_ID_FILE=$dir/id
export VCCL_NCCL_TEST_ID_FILE
"$(dirname "$0")/../mpi/run-mpi-test.sh" 2 "${top_builddir:-.}/tests/nccl_compat/test_nccl_compat" "$@"
