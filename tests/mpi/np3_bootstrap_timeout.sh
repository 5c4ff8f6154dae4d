#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# test_bootstrap_timeout on 3 ranks (ranks 0 and 1 wait for rank 2, which never joins).
exec "$(dirname "$0")/run-mpi-test.sh" 3 "${top_builddir:-.}/tests/mpi/test_bootstrap_timeout" "$@"
