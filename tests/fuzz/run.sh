#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Runs every fuzz target built by build.sh for a short time: run.sh [OUTDIR] (default: build-fuzz/).
#   FUZZ_SECONDS  per target (default 25), FUZZ_TARGETS  which ones (default: all built).
# Each target starts from tests/fuzz/corpus/<target>/ (read only; new inputs go to OUTDIR/corpus/<target>/)
# and counts as one test case in OUTDIR/test-results/fuzz.xml (passed when libFuzzer found no crash, leak,
# timeout or sanitizer report), which contrib/ci/summarize-tests.sh reads. A crashing input is kept as
# OUTDIR/artifacts/<target>-crash-*; reproduce with `OUTDIR/<target> FILE`.
set -uo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:-$top/build-fuzz}
secs=${FUZZ_SECONDS:-25}
targets=${FUZZ_TARGETS:-$(cd "$top/tests/fuzz" && ls fuzz_*.cc | sed 's/\.cc$//')}
mkdir -p "$out/test-results" "$out/artifacts" "$out/logs"
xml=$out/test-results/fuzz.xml
cases=""
nfail=0
ntests=0
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export VCCL_DEBUG=${VCCL_DEBUG:-NONE}
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$top/contrib/ci/lsan.supp:print_suppressions=0}
for t in $targets; do
    ntests=$((ntests + 1))
    log=$out/logs/$t.log
    mkdir -p "$out/corpus/$t"
    start=$(date +%s)
    if [ -x "$out/$t" ]; then
        # -timeout: one input running longer than this is a finding (a hang); the outer timeout is a backstop.
        timeout -k 10 $((secs + 120)) "$out/$t" -max_total_time="$secs" -timeout=20 -rss_limit_mb=2048 \
            -print_final_stats=1 -artifact_prefix="$out/artifacts/$t-" \
            "$out/corpus/$t" "$top/tests/fuzz/corpus/$t" >"$log" 2>&1
        rc=$?
    else
        echo "run.sh: $out/$t was not built" >"$log"
        rc=99
    fi
    end=$(date +%s)
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
    echo "fuzz: $t: exit $rc, ${runs:-0} runs in $((end - start)) s"
    cases+="  <testcase name=\"$t\" classname=\"fuzz\" time=\"$((end - start))\">"$'\n'
    if [ $rc -ne 0 ]; then
        nfail=$((nfail + 1))
        tail -n 40 "$log" | sed 's/^/    /'
        cases+="    <failure message=\"exit $rc\"><![CDATA[$(tail -n 40 "$log" | sed 's/]]>/]] >/g')]]></failure>"$'\n'
    fi
    cases+="  </testcase>"$'\n'
done
{
    echo '<?xml version="1.0" encoding="UTF-8"?>'
    echo "<testsuites tests=\"$ntests\" failures=\"$nfail\" name=\"fuzz\">"
    echo "<testsuite name=\"fuzz\" tests=\"$ntests\" failures=\"$nfail\">"
    printf '%s' "$cases"
    echo '</testsuite>'
    echo '</testsuites>'
} >"$xml"
[ $nfail -eq 0 ]
