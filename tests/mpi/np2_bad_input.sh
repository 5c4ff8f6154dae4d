#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# test_bad_input on 2 ranks.
exec "$(dirname "$0")/run-mpi-test.sh" 2 "${top_builddir:-.}/tests/mpi/test_bad_input" "$@"
