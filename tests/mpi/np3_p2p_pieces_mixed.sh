#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Listed in tests/mpi/Makefile.inc: test_p2p on 3 ranks with VCCL_STAGING_CHUNK_BYTES=4K on rank 0 only (the
# others keep 4M). Communicators take rank 0's value at creation (the others warn), so every rank cuts send/recv
# messages into the same pieces; without that agreement the ranks' pieces do not pair up and the test times out.
VTEST_BINARY=${top_builddir:-.}/tests/mpi/test_p2p
VTEST_RANK0_ENV=VCCL_STAGING_CHUNK_BYTES=4K
export VTEST_BINARY VTEST_RANK0_ENV
exec "$(dirname "$0")/run-mpi-test.sh" 3 "$(dirname "$0")/rank0_env.sh" "$@"
