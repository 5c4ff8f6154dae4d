#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# vccl-telemetry clean removes the ring that a killed process left in /dev/shm and keeps the ring of a live
# one; top marks the first "dead" and points at clean. Runs in a private mount namespace with a /dev/shm of
# its own where it can (root and unshare), so the host's rings are not touched; otherwise on /dev/shm, where
# clean may also remove other dead rings of this user (which is what it is for).
builddir=${top_builddir:-.}
tool=$builddir/vccl-telemetry
perf=$builddir/vccl-perf
if [ -z "$VCLEAN_INSIDE" ] && [ "$(id -u)" = 0 ] && command -v unshare >/dev/null 2>&1 && unshare -m true 2>/dev/null; then
    exec env VCLEAN_INSIDE=1 unshare -m sh -c 'mount -t tmpfs -o size=64m tmpfs /dev/shm && exec sh "$0"' "$0"
fi
[ -x "$tool" ] && [ -x "$perf" ] || { echo "FAIL: $tool or $perf not built"; exit 1; }

fail() {
    echo "FAIL: $*"
    kill -9 $dead_pid $live_pid 2>/dev/null
    exit 1
}
job_dead=vcleandead$$
job_live=vcleanlive$$
# One-rank benchmarks that run until killed; each publishes a ring.
VCCL_TELEMETRY_JOB=$job_dead "$perf" -b 8 -e 8 -n 1000000000 -w 1 allreduce >/dev/null 2>&1 &
dead_pid=$!
VCCL_TELEMETRY_JOB=$job_live "$perf" -b 8 -e 8 -n 1000000000 -w 1 allreduce >/dev/null 2>&1 &
live_pid=$!
ring() { ls /dev/shm 2>/dev/null | grep "^vccl-$1-" | head -1; }
i=0
while [ -z "$(ring $job_dead)" ] || [ -z "$(ring $job_live)" ]; do
    i=$((i + 1))
    [ $i -gt 300 ] && fail "no rings after 30 s: $(ls /dev/shm)"
    sleep 0.1
done
dead_ring=$(ring $job_dead)
live_ring=$(ring $job_live)
kill -9 $dead_pid
wait $dead_pid 2>/dev/null
[ -e "/dev/shm/$dead_ring" ] || fail "the killed process's ring is already gone"

out=$("$tool" top --once)
echo "$out" | grep "$dead_ring" | grep -q "dead]" || fail "top does not mark $dead_ring dead: $out"
echo "$out" | grep "$live_ring" | grep -q "live]" || fail "top does not mark $live_ring live: $out"
echo "$out" | grep -q "vccl-telemetry clean removes them" || fail "top does not point at clean: $out"

out=$("$tool" clean --dry-run) || fail "clean --dry-run exited non-zero: $out"
echo "$out" | grep -q "would remove /dev/shm/$dead_ring" || fail "dry run does not list $dead_ring: $out"
[ -e "/dev/shm/$dead_ring" ] || fail "the dry run removed $dead_ring"

out=$("$tool" clean) || fail "clean exited non-zero: $out"
echo "$out" | grep -q "removed /dev/shm/$dead_ring" || fail "clean does not report $dead_ring: $out"
[ ! -e "/dev/shm/$dead_ring" ] || fail "$dead_ring is still there after clean"
[ -e "/dev/shm/$live_ring" ] || fail "clean removed the live ring $live_ring"
echo "$out" | grep -q "kept [1-9][0-9]* of live processes" || fail "clean does not count the live ring: $out"

"$tool" clean --bogus >/dev/null 2>&1
[ $? -eq 2 ] || fail "an unknown option must exit 2"

kill -9 $live_pid
wait $live_pid 2>/dev/null
"$tool" clean >/dev/null || fail "second clean failed"
[ ! -e "/dev/shm/$live_ring" ] || fail "$live_ring is still there after its process died and clean ran"
echo "PASS: clean removed $dead_ring, kept $live_ring while it lived"
