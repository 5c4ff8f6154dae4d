#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Listed in tests/contrib/Makefile.inc: tests/contrib/test_scaling_model.py on contrib/scaling-model/model.py (see
# its header). Needs python3 (skipped without it); takes a few seconds.
command -v python3 >/dev/null 2>&1 || { echo "SKIP: python3 not found"; exit 77; }
src=${top_srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}
exec python3 "$src/tests/contrib/test_scaling_model.py" "$src"
