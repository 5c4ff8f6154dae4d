#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Listed in tests/mpi/Makefile.inc: test_recovery's Grow cases on 4 rank(s) (2 -> 3 -> 4); the rest runs at 3.
exec "$(dirname "$0")/run-mpi-test.sh" 4 "${top_builddir:-.}/tests/mpi/test_recovery" --gtest_filter='Grow.*' "$@"
