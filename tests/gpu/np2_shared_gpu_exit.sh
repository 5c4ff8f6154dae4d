#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Listed in tests/gpu/Makefile.inc: processes that exit right after vcclCommAbort left device work pending, so
# that the abort's teardown thread is waiting for the stream, or freeing the communicator's GPU state, while the
# process exits and CUDA tears itself down (tests/gpu/exit_worker.cc). Every job must exit 0, without a crash or
# a hang. 2 ranks sharing GPU 0; EXIT_ROUNDS (default 3) times each delay between letting the stream go and the
# exit (-1: the stream stays blocked), and jobs whose teardown threads hold 500 ms once they begin freeing (a
# test point, asked for through the test library): the exit must wait for them, so each rank's thread must say that
# it finished.
VTEST_GPU_SHARE=1
VCCL_TEST_HARD_TIMEOUT=${VCCL_TEST_HARD_TIMEOUT:-60}
export VTEST_GPU_SHARE VCCL_TEST_HARD_TIMEOUT
here=$(dirname "$0")
worker=${top_builddir:-.}/tests/gpu/exit_worker
rounds=${EXIT_ROUNDS:-3}
log=$(mktemp) || exit 99
trap 'rm -f "$log"' EXIT
trap 'exit 143' INT TERM
jobs=0
failed=0
round=0
while [ "$round" -lt "$rounds" ]; do
    for job in -1 0 200 1000 2000 5000 20000 20000:500; do
        delay=${job%%:*}
        hold=0
        case $job in *:*) hold=${job#*:} ;; esac
        start=$(date +%s%N)
        "$here/run-gpu-test.sh" 2 "$worker" "$delay" "$hold" > "$log" 2>&1
        rc=$?
        took=$((($(date +%s%N) - start) / 1000000))
        jobs=$((jobs + 1))
        # No GPU: a skip, but only at the first job; later, a GPU that became unusable is a failure.
        [ "$rc" -eq 77 ] && [ "$jobs" -eq 1 ] && { cat "$log"; exit 77; }
        what="delay $delay us, hold $hold ms, round $round"
        why=
        if [ "$rc" -ne 0 ]; then
            why="exit status $rc"
        elif [ "$hold" -gt 0 ]; then
            done_lines=$(grep -c "a teardown thread finished freeing" "$log")
            [ "$done_lines" -eq 2 ] || why="$done_lines of 2 teardown threads finished before their process exited"
        fi
        if [ -n "$why" ]; then
            failed=$((failed + 1))
            echo "FAIL: $what: $why, after $took ms"
            sed 's/^/    /' "$log"
        else
            echo "ok: $what: $took ms"
        fi
    done
    round=$((round + 1))
done
echo "$jobs jobs, $failed failed"
[ "$failed" -eq 0 ]
