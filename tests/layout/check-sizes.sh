#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Listed in tests/layout/Makefile.inc: tests/layout/check_sizes.py over the source tree (see its header).
command -v python3 >/dev/null 2>&1 || { echo "SKIP: python3 not found"; exit 77; }
exec python3 "${top_srcdir:-$(dirname "$0")/../..}/tests/layout/check_sizes.py" "${top_srcdir:-$(dirname "$0")/../..}"
