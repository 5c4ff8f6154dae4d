#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Listed in tests/mpi/Makefile.inc: test_comm on 2 rank(s).
exec "$(dirname "$0")/run-mpi-test.sh" 2 "${top_builddir:-.}/tests/mpi/test_comm" "$@"
