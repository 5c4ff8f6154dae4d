#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Listed in tests/mpi/Makefile.inc: vccl-perf --baseline telemetry-off on 2 ranks, host memory. The measured
# communicator follows VCCL_TELEMETRY: on by default, off with VCCL_TELEMETRY=0, which makes the run the
# control of contrib/bench-telemetry.sh, and the header must say which (a version that forced telemetry on
# made every "control" a repeat of the measurement). Also checks the verified results (-c 1, 0 wrong) and
# the JSON's call_us (host time per operation in the calls: present, positive, at most the operation time
# plus 10%, since host-memory calls complete the operation). Then --baseline telemetry-paused (the same
# communicator, recording paused): its header, its verified baseline, and a clear refusal with telemetry off;
# and --baseline self (the A/A control) on allgather.
perf=${top_builddir:-.}/vccl-perf
[ -x "$perf" ] || { echo "np2_perf_telemetry_control.sh: $perf not built" >&2; exit 99; }
tmp=$(mktemp -d) || exit 99
trap 'rm -rf "$tmp"' EXIT
run() { # $1: on|off; writes $tmp/$1.txt and $tmp/$1.json
    if [ "$1" = off ]; then
        VCCL_TELEMETRY=0 timeout 120 mpirun --allow-run-as-root --oversubscribe --bind-to none --mca pml ob1 \
            --mca btl self,vader -np 2 -x VCCL_TELEMETRY "$perf" -b 8 -e 64K -f 64 -n 90 -w 9 -c 1 \
            --baseline telemetry-off -J "$tmp/$1.json" allreduce > "$tmp/$1.txt" 2>&1
    else
        env -u VCCL_TELEMETRY timeout 120 mpirun --allow-run-as-root --oversubscribe --bind-to none --mca pml ob1 \
            --mca btl self,vader -np 2 "$perf" -b 8 -e 64K -f 64 -n 90 -w 9 -c 1 \
            --baseline telemetry-off -J "$tmp/$1.json" allreduce > "$tmp/$1.txt" 2>&1
    fi
}
fail=0
for mode in on off; do
    if ! run $mode; then
        echo "FAIL: vccl-perf with telemetry $mode exited with an error:"; cat "$tmp/$mode.txt"; fail=1; continue
    fi
    want="telemetry on)"
    [ $mode = off ] && want="telemetry OFF: VCCL_TELEMETRY=0, a control run)"
    if grep -q "# telemetry-off baseline: out-of-place time ($want" "$tmp/$mode.txt"; then
        echo "ok: header of the $mode run says ($want"
    else
        echo "FAIL: the $mode run's header does not say ($want:"; grep "telemetry-off baseline" "$tmp/$mode.txt"; fail=1
    fi
    # One JSON line per size (3 sizes: 8, 512, 32768): every wrong count 0, in_place's call_us within bounds.
    sizes=$(grep -c '"size":' "$tmp/$mode.json")
    bad=$(awk '/"size":/ {
            n = split($0, w, /"wrong": /); for (i = 2; i <= n; i++) if (w[i] + 0 != 0 || w[i] ~ /^null/) print "wrong " w[i]
            ip = $0; sub(/.*"in_place": \{"time_us": /, "", ip); t = ip + 0
            if (ip !~ /"call_us": /) { print "no call_us in in_place"; next }
            c = ip; sub(/.*"call_us": /, "", c); c = c + 0
            if (c <= 0 || c > t * 1.1 + 0.5) print "call_us " c " against time_us " t
        }' "$tmp/$mode.json")
    if [ "$sizes" -ne 3 ] || [ -n "$bad" ]; then
        echo "FAIL: $mode run: $sizes sizes in the JSON (want 3); $bad"; fail=1
    else
        echo "ok: $mode run: 3 sizes verified, call_us within the operation time"
    fi
done
paired() { # $1: VCCL_TELEMETRY, $2: baseline, $3: collective; writes $tmp/$2.txt and $tmp/$2.json
    env VCCL_TELEMETRY=$1 timeout 120 mpirun --allow-run-as-root --oversubscribe --bind-to none --mca pml ob1 \
        --mca btl self,vader -np 2 -x VCCL_TELEMETRY "$perf" -b 8 -e 64K -f 64 -n 90 -w 9 -c 1 \
        --baseline "$2" -J "$tmp/$2.json" "$3" > "$tmp/$2.txt" 2>&1
}
# check_paired BASELINE COLLECTIVE HEADER: the run succeeds, its header line is HEADER, and every size of its
# JSON has a verified baseline under the key BASELINE.
check_paired() {
    if ! paired 1 "$1" "$2"; then
        echo "FAIL: vccl-perf --baseline $1 exited with an error:"; cat "$tmp/$1.txt"; fail=1
    elif ! grep -qF "$3" "$tmp/$1.txt"; then
        echo "FAIL: the $1 run's header is wrong:"; grep "baseline" "$tmp/$1.txt"; fail=1
    else
        bad=$(awk -v key="\"$1\": {\"time_us\": " '/"size":/ {
                  rest = index($0, key) ? substr($0, index($0, key)) : ""
                  if (rest !~ /^"[a-z-]+": \{"time_us": [0-9.]+, [^}]*"wrong": 0/) print "line without a verified baseline"
              }' "$tmp/$1.json")
        if [ "$(grep -c '"size":' "$tmp/$1.json")" -ne 3 ] || [ -n "$bad" ]; then
            echo "FAIL: $1 run JSON: $bad"; cat "$tmp/$1.json"; fail=1
        else
            echo "ok: $1 run: header, 3 sizes with a verified baseline"
        fi
    fi
}
check_paired telemetry-paused allreduce \
    "# telemetry-paused baseline: out-of-place time (telemetry on) and baseline time (the same communicator, recording paused)"
if paired 0 telemetry-paused allreduce || ! grep -q "telemetry is off (VCCL_TELEMETRY=0): nothing to pause" "$tmp/telemetry-paused.txt"; then
    echo "FAIL: --baseline telemetry-paused with VCCL_TELEMETRY=0 did not fail clearly:"; tail -5 "$tmp/telemetry-paused.txt"; fail=1
else
    echo "ok: paused run with telemetry off refused with a clear message"
fi
# --baseline self: the A/A control, the same communicator timed against itself (ratio column a/a).
check_paired self allgather \
    "# self baseline: out-of-place time (telemetry on) and baseline time (the same communicator, unchanged: an A/A control)"
grep -q "a/a" "$tmp/self.txt" || { echo "FAIL: the self run's table has no a/a column"; fail=1; }
exit $fail
