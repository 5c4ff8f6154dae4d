#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Listed in tests/mpi/Makefile.inc: test_collectives on 3 ranks with VCCL_CHUNK_SIZE=4K and
# VCCL_ALLREDUCE_SMALL_BYTES=0 on rank 0 only (the others keep 1M and 64K). Communicators take rank 0's values
# at creation (the others warn), so every rank pipelines the same chunks and picks the same allreduce
# algorithm; without that agreement the ranks' messages do not pair up (mismatched sizes, or a timeout).
VTEST_BINARY=${top_builddir:-.}/tests/mpi/test_collectives
VTEST_RANK0_ENV="VCCL_CHUNK_SIZE=4K VCCL_ALLREDUCE_SMALL_BYTES=0"
export VTEST_BINARY VTEST_RANK0_ENV
exec "$(dirname "$0")/run-mpi-test.sh" 3 "$(dirname "$0")/rank0_env.sh" "$@"
