#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Checks contrib/spack/package.py without Spack (check-spack-recipe.sh [RECIPE]): check_spack_recipe.py runs
# the recipe against a stub of Spack's package API for every combination of its variants and checks each
# configure option it produces against `configure --help` of the source tree (or, where configure has not
# been generated, against the AC_ARG_WITH/AC_ARG_ENABLE names of configure.ac and config/m4). Then checks
# that the checker itself fails on a recipe that passes an option configure does not have.
# Needs python3 (skipped without it).
set -u
src=${top_srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}
here=$(cd "$(dirname "$0")" && pwd)
checker=$here/check_spack_recipe.py
recipe=${1:-$src/contrib/spack/package.py}

command -v python3 >/dev/null 2>&1 || { echo "SKIP: python3 not found"; exit 77; }
if [ -f "$src/configure" ]; then
    reference=(--configure "$src/configure")
else
    reference=(--m4 "$src/configure.ac" "$src"/config/m4/*.m4)
fi

fail=0
echo "== $recipe"
python3 "$checker" "$recipe" "${reference[@]}" || fail=1

# The checker must be able to fail: a recipe whose configure_args() passes an option configure lacks.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat >"$tmp/package.py" <<'RECIPE'
from spack.package import *


class Bogus(AutotoolsPackage):
    version("main", branch="main")
    variant("cuda", default=True, description="CUDA")
    depends_on("cuda", when="+cuda")

    def configure_args(self):
        return self.with_or_without("cuda", activation_value="prefix") + ["--with-no-such-option-here"]
RECIPE
echo "== a recipe with an option configure does not accept (must fail)"
if python3 "$checker" "$tmp/package.py" "${reference[@]}" >"$tmp/out" 2>&1; then
    cat "$tmp/out"
    echo "FAIL: the checker accepted --with-no-such-option-here"
    fail=1
elif ! grep -q -- "--with-no-such-option-here" "$tmp/out"; then
    cat "$tmp/out"
    echo "FAIL: the checker failed without naming --with-no-such-option-here"
    fail=1
else
    grep "^FAIL" "$tmp/out" | head -3 | sed -E 's/^FAIL:? */    as expected: /'
    echo "PASS the checker rejects it"
fi
exit $fail
