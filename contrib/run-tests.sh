#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Builds vccl if needed and runs the whole test suite (unit, multi-rank, checks), then prints one line
# "N passed, N failed". Exit status 0 only when nothing failed.
set -uo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$top/build}
"$top/contrib/build.sh" || { echo "0 passed, 1 failed"; exit 1; }
cd "$build"
rm -rf test-results
mkdir -p test-results
# Build the test programs in parallel, then run the tests one at a time: the multi-rank tests oversubscribe
# the cores and would slow each other down past their timeouts.
make -j"${JOBS:-2}" check TESTS= >check.out 2>&1 && make -j1 check >>check.out 2>&1
rc=$?
tail -n 30 check.out
# A failed test's own log says why; CI keeps only this output, so show the end of each.
shopt -s globstar nullglob
crash_re='Assertion|terminate called|what\(\):|double free|corrupted|free\(\):|Fatal|Signal:|Signal code|\[ ?[0-9]\] |ERROR: [A-Za-z]*Sanitizer|runtime error:'
for trs in tests/**/*.trs; do
    grep -q '^:test-result: \(FAIL\|ERROR\)' "$trs" || continue
    # The cause of a crash is printed before its backtrace, often more than 40 lines up.
    if grep -q -E "$crash_re" "${trs%.trs}.log"; then
        echo "==== crash lines of ${trs%.trs}.log"
        grep -m 20 -B 2 -E "$crash_re" "${trs%.trs}.log" | cut -c1-400
    fi
    echo "==== last lines of ${trs%.trs}.log"
    tail -n "${FAILED_LOG_LINES:-40}" "${trs%.trs}.log" | cut -c1-400
done
"$top/contrib/ci/summarize-tests.sh" "$build"
src=$?
[ $rc -eq 0 ] && [ $src -eq 0 ]
