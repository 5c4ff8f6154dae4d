#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Multi-path (VCCL_MULTIPATH) benchmark on real links: two ranks in network namespaces joined by two veth rails
# (tests/fault/netns.sh), both ends of each rail limited by tc tbf (as tests/hosts/hosts-common.sh does), vccl-perf
# sendrecv between them (one connection each way), standby against spray, alternating runs.
#
#   contrib/bench-spray.sh [--build DIR] [--rate RATE] [--repeats N] [--iters N] [--lat-iters N]
#
# Three measurements, each spray against standby in the same run of this script:
#  (1) both rails at RATE (default 1gbit): 16-64 MiB bandwidth (target: spray >= 1.8x standby);
#  (2) rail1 at RATE/10: 16-64 MiB bandwidth (spray should keep about one full rail and not drop the slow one);
#  (3) both rails at RATE: 8 B - 64 KiB latency (target: spray within 3% of standby; small messages are not
#      sprayed). Each mode runs N times (default 3) alternately; the best time per size is kept (the machine
#      is shared: the best run is the one least disturbed).
# Prints Markdown tables for docs/PERFORMANCE.md. Needs root; exits 77 when namespaces cannot be made.
set -u
src=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$src/build}
rate=1gbit
repeats=3
iters=5
lat_iters=300
while [ $# -gt 0 ]; do
    case $1 in
        --build) build=$2; shift ;;
        --rate) rate=$2; shift ;;
        --repeats) repeats=$2; shift ;;
        --iters) iters=$2; shift ;;
        --lat-iters) lat_iters=$2; shift ;;
        *) echo "usage: $0 [--build DIR] [--rate RATE] [--repeats N] [--iters N] [--lat-iters N]" >&2; exit 2 ;;
    esac
    shift
done
perf=$build/vccl-perf
[ -x "$perf" ] || { echo "bench-spray.sh: build $perf first" >&2; exit 2; }
: "${MPIRUN:=mpirun}"
. "$src/tests/fault/netns.sh"
vf_setup
work=$(mktemp -d "${TMPDIR:-/tmp}/bench-spray.XXXXXX")
trap 'vf_cleanup; rm -rf "$work"' EXIT
trap 'vf_cleanup; rm -rf "$work"; exit 130' INT
trap 'vf_cleanup; rm -rf "$work"; exit 143' TERM

shape() { # shape RAIL RATE: both ends
    local ns
    for ns in "$VF_NS0" "$VF_NS1"; do
        tc -n "$ns" qdisc replace dev "$1" root tbf rate "$2" burst 256kb latency 50ms || exit 1
    done
}
# slow RATE: RATE/10 in tc's units (1gbit -> 100mbit)
tenth() { echo "$1" | awk '{ n = $1 + 0; u = substr($1, length(n "") + 1); printf "%g%s\n", n / 10, u }'; }

# perf MODE JSON ARGS...: one vccl-perf sendrecv run of 2 ranks, one per namespace
perf_run() {
    local mode=$1 json=$2
    shift 2
    VCCL_MULTIPATH=$mode VCCL_NET_DEVICES=rail0 VCCL_BACKUP_NET_DEVICES=rail1 VCCL_FAILOVER=on VCCL_UCX_TLS=tcp \
        VCCL_TELEMETRY_SHM=0 VCCL_OP_TIMEOUT_MS=60000 \
        timeout -k 5 600 $MPIRUN --allow-run-as-root --oversubscribe --bind-to none --mca pml ob1 \
        --mca btl self,vader -np 2 "$perf" --emulated-hosts "${VF_PREFIX}r:0,1" -c 1 -a 3 -J "$json" "$@" sendrecv \
        >>"$work/log" 2>&1 || { echo "bench-spray.sh: vccl-perf failed ($mode $*), log:" >&2; tail -30 "$work/log" >&2; exit 1; }
}
# series NAME ARGS...: REPEATS alternating runs of both modes, JSON files NAME.MODE.I.json
series() {
    local name=$1 i mode
    shift
    for i in $(seq "$repeats"); do
        for mode in standby spray; do
            echo "bench-spray: $name, $mode, run $i" >&2
            perf_run "$mode" "$work/$name.$mode.$i.json" "$@"
        done
    done
}

shape rail0 "$rate"
shape rail1 "$rate"
series equal -b 16M -e 64M -f 2 -n "$iters" -w 2
series latency -b 8 -e 64K -f 2 -n "$lat_iters" -w 20
slow=$(tenth "$rate")
shape rail1 "$slow"
series slow -b 16M -e 64M -f 2 -n "$iters" -w 2

python3 - "$work" "$repeats" <<'PY'
import glob, json, os, sys
work, repeats = sys.argv[1], int(sys.argv[2])
def best(name, mode):
    out = {}
    for f in glob.glob(os.path.join(work, "%s.%s.*.json" % (name, mode))):
        for r in json.load(open(f))["results"]:
            t = r["out_of_place"]["time_us"]
            if r["size"] not in out or t < out[r["size"]][0]:
                out[r["size"]] = (t, r["out_of_place"]["algbw_gbs"], r["out_of_place"]["wrong"])
    return out
def size_text(b):
    for unit, n in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= n and b % n == 0: return "%d %s" % (b // n, unit)
    return "%d B" % b
for name, title in (("equal", "Bandwidth, both rails at the same rate"), ("slow", "Bandwidth, rail1 at 1/10 of rail0")):
    a, b = best(name, "standby"), best(name, "spray")
    print("\n%s (sendrecv, algbw, best of %d runs per mode)\n" % (title, repeats))
    print("| Size | standby GB/s | spray GB/s | spray / standby | wrong |")
    print("|---|---|---|---|---|")
    for s in sorted(a):
        if s in b:
            print("| %s | %.4f | %.4f | %.2fx | %d |" % (size_text(s), a[s][1], b[s][1], b[s][1] / a[s][1] if a[s][1] else 0, a[s][2] + b[s][2]))
a, b = best("latency", "standby"), best("latency", "spray")
print("\nLatency, both rails at the same rate (sendrecv time, best of %d runs per mode)\n" % repeats)
print("| Size | standby us | spray us | spray / standby | wrong |")
print("|---|---|---|---|---|")
worst = 0
for s in sorted(a):
    if s in b:
        r = b[s][0] / a[s][0]
        worst = max(worst, abs(r - 1))
        print("| %s | %.1f | %.1f | %.3f | %d |" % (size_text(s), a[s][0], b[s][0], r, a[s][2] + b[s][2]))
print("\nLargest latency difference: %.1f%%" % (worst * 100))
PY
echo "(rails: $rate, slow rail $slow; commit $(git -C "$src" rev-parse --short HEAD 2>/dev/null || echo unknown), $(date -u +%Y-%m-%d))"
