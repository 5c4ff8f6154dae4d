#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Listed in tests/mpi/Makefile.inc: test_p2p on 4 rank(s).
exec "$(dirname "$0")/run-mpi-test.sh" 4 "${top_builddir:-.}/tests/mpi/test_p2p" "$@"
