#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Listed in tests/mpi/Makefile.inc: vccl-perf --cpu on 2 ranks, host memory, with the MPI baseline and with the
# telemetry-off pairing. The table gets the two processor-use columns per side; the JSON has cpu_pct and
# other_threads_cpu_pct for out_of_place, in_place and the baseline, each in range: the process's share
# positive and at most every core busy, the other threads' share not above the process's. No floor above
# zero: a waiting rank backs off to short sleeps, and on a crowded machine (both ranks beside other jobs)
# its share fell to 12.7% and, with the 2 cores overloaded twice over, to 1.7%. A meter counting nothing
# gives 0 and fails here; the meter's arithmetic is checked against threads of known load in
# tests/unit/test_perf_cpu.cc. --soak refuses --cpu.
perf=${top_builddir:-.}/vccl-perf
[ -x "$perf" ] || { echo "np2_perf_cpu.sh: $perf not built" >&2; exit 99; }
tmp=$(mktemp -d) || exit 99
trap 'rm -rf "$tmp"' EXIT
cores=$(nproc 2>/dev/null || echo 1)
fail=0
run() { # $1: name, then vccl-perf arguments
    name=$1
    shift
    timeout 120 mpirun --allow-run-as-root --oversubscribe --bind-to none --mca pml ob1 --mca btl self,vader \
        -np 2 "$perf" --cpu -J "$tmp/$name.json" "$@" > "$tmp/$name.txt" 2>&1
}
# check NAME KEYS: every size line of NAME's JSON has a verified measure with CPU figures in range per key.
check() {
    name=$1
    keys=$2
    bad=$(awk -v keys="$keys" -v cores="$cores" '/"size":/ {
            n = split(keys, k, " ")
            for (i = 1; i <= n; i++) {
                p = index($0, "\"" k[i] "\": {")
                if (p == 0) { print k[i] ": missing"; continue }
                m = substr($0, p); sub(/}.*/, "", m)
                if (m !~ /"wrong": 0/) print k[i] ": not verified"
                if (m !~ /"cpu_pct": /) { print k[i] ": no cpu_pct"; continue }
                c = m; sub(/.*"cpu_pct": /, "", c); c = c + 0
                o = m; sub(/.*"other_threads_cpu_pct": /, "", o); o = o + 0
                if (m !~ /"other_threads_cpu_pct": /) print k[i] ": no other_threads_cpu_pct"
                else if (c <= 0 || c > 100 * cores + 10 || o < 0 || o > c + 0.01)
                    print k[i] ": cpu_pct " c " other_threads_cpu_pct " o " out of range (" cores " cores)"
            }
        }' "$tmp/$name.json")
    sizes=$(grep -c '"size":' "$tmp/$name.json")
    if [ "$sizes" -ne 3 ] || [ -n "$bad" ]; then
        echo "FAIL: $name: $sizes sizes (want 3); $bad"; cat "$tmp/$name.json"; fail=1
    else
        echo "ok: $name: 3 sizes, CPU figures in range for $keys"
    fi
}
if ! run mpi -b 8 -e 64K -f 64 -n 200 -w 10 -c 1 --baseline mpi allreduce; then
    echo "FAIL: vccl-perf --cpu --baseline mpi exited with an error:"; cat "$tmp/mpi.txt"; fail=1
else
    # header: two 'all others' groups (vccl and the baseline); rows: 20 fields (16 without --cpu)
    if grep -q "cpu, vccl.*cpu, baseline" "$tmp/mpi.txt" && [ "$(grep -c 'all  others' "$tmp/mpi.txt")" -eq 1 ] &&
       awk '/^ +[0-9]/ && NF != 20 { bad = 1 } END { exit bad }' "$tmp/mpi.txt"; then
        echo "ok: mpi: table has the CPU columns for vccl and the baseline"
    else
        echo "FAIL: mpi: table lacks the CPU columns:"; cat "$tmp/mpi.txt"; fail=1
    fi
    check mpi "out_of_place in_place mpi"
fi
if ! run paired -b 8 -e 64K -f 64 -n 90 -w 9 -c 1 --baseline telemetry-off allgather; then
    echo "FAIL: vccl-perf --cpu --baseline telemetry-off exited with an error:"; cat "$tmp/paired.txt"; fail=1
else
    check paired "out_of_place in_place telemetry-off"
fi
out=$(timeout 60 "$perf" --soak 5 --cpu 2>&1)
rc=$?
if [ $rc -eq 2 ] && printf '%s\n' "$out" | grep -qF -- "--soak: has no --cpu"; then
    echo "ok: --soak refuses --cpu"
else
    echo "FAIL: --soak --cpu: exit $rc, output: $out"; fail=1
fi
exit $fail
