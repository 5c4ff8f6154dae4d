#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Listed in tests/mpi/Makefile.inc: test_p2p on 3 ranks with send/recv messages cut into pieces of 4 KiB
# (VCCL_STAGING_CHUNK_BYTES; at most 64 a message, so 2 MiB and 8 MiB messages get larger ones): every message
# over 4 KiB crosses the wire as several tagged pieces, in and out of groups, several to one peer, in place.
VCCL_STAGING_CHUNK_BYTES=4K
export VCCL_STAGING_CHUNK_BYTES
exec "$(dirname "$0")/run-mpi-test.sh" 3 "${top_builddir:-.}/tests/mpi/test_p2p" "$@"
