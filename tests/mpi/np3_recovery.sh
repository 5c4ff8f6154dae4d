#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Listed in tests/mpi/Makefile.inc: test_recovery on 3 rank(s).
exec "$(dirname "$0")/run-mpi-test.sh" 3 "${top_builddir:-.}/tests/mpi/test_recovery" "$@"
