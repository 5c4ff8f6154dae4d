#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Listed in tests/mpi/Makefile.inc: test_p2p on 8 rank(s).
exec "$(dirname "$0")/run-mpi-test.sh" 8 "${top_builddir:-.}/tests/mpi/test_p2p" "$@"
