#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Failover benchmark on real links: two ranks in network namespaces joined by two veth rails (tests/fault/netns.sh),
# fault_worker running 4 MiB allreduces (and mixed sizes for the flap run) while rail0 is broken.
#
#   contrib/bench-fault.sh [--build DIR] [--flaps N] [--events N] [--full] [--flap-ms MS]
#
# Four runs: (1) rail0 port down for 3 s then up: detection, stall, backup and healthy bandwidth, failback;
# (2) rail0 silently dropping everything for 3 s: detection by ack timeout; (3) N quick flaps (default 100,
# --full: 1000) of rail0, each state FLAP_MS (default 100) long: wrong elements and errors over N events
# (after the first flaps the failback hold keeps traffic on rail1: this checks hysteresis and safety, not N
# switches); (4) N faults alternating between the rails (--events, default 100, --full: 1000), each taking
# down the rail in use for FLAP_MS and restoring it: N real failovers, wrong elements and errors over them.
# Prints a Markdown table for docs/RELIABILITY.md (with the command and settings). Needs root; exits 77
# when namespaces cannot be made. Times are the worse of the two ranks; bandwidths are their mean.
set -u
src=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$src/build}
flaps=100
events=100
flap_ms=100
while [ $# -gt 0 ]; do
    case $1 in
        --build) build=$2; shift ;;
        --flaps) flaps=$2; shift ;;
        --events) events=$2; shift ;;
        --full) flaps=1000 events=1000 ;;
        --flap-ms) flap_ms=$2; shift ;;
        *) echo "usage: $0 [--build DIR] [--flaps N] [--events N] [--full] [--flap-ms MS]" >&2; exit 2 ;;
    esac
    shift
done
export VF_WORKER=${VF_WORKER:-$build/tests/fault/fault_worker}
[ -x "$VF_WORKER" ] || { echo "bench-fault.sh: build $VF_WORKER first (make -C $build tests/fault/fault_worker)" >&2; exit 2; }
. "$src/tests/fault/fault-common.sh"
VF_KEEP=1 # results are read after each run; the folders are removed below
log=$(mktemp "${TMPDIR:-/tmp}/bench-fault.XXXXXX.log")
dirs=()

# run NAME DURATION MODE SCHEDULE...: one worker run; its folder is left in $VF_DIR.
run() {
    local name=$1 duration=$2 mode=$3
    shift 3
    echo "bench-fault: $name (log: $log)" >&2
    vf_fail_reasons=()
    {
        vf_start "$duration" "$mode" && "$@"
        vf_finish
    } >>"$log" 2>&1
    dirs+=("$VF_DIR")
    vf_cleanup
}
# worst NAME KEY / mean NAME KEY over both ranks' results of run NAME (folder index); -1 stays "n/a".
field() { sed -n "s/.*\"$2\":\(\"[^\"]*\"\|[^,}]*\).*/\1/p" "$1" | tr -d '"'; }
worst() { for r in 0 1; do field "$1/result.r$r.json" "$2"; done | awk 'BEGIN { m = -1 } $1 != "" && $1 + 0 > m { m = $1 + 0 } END { print m }'; }
total() { for r in 0 1; do field "$1/result.r$r.json" "$2"; done | awk '{ s += $1 } END { print s + 0 }'; }
least() { for r in 0 1; do field "$1/result.r$r.json" "$2"; done | awk 'BEGIN { m = -1 } $1 != "" && (m < 0 || $1 + 0 < m) { m = $1 + 0 } END { print m }'; }
mean() { for r in 0 1; do field "$1/result.r$r.json" "$2"; done | awk '$1 >= 0 { s += $1; n++ } END { print n ? s / n : -1 }'; }
show() { awk -v v="$1" -v unit="$2" 'BEGIN { if (v < 0) print "n/a"; else printf "%.*f %s\n", (unit == "GB/s" ? 3 : 1), v, unit }'; }

linkdown() { vf_at_ms 3000 vf_link_down rail0; vf_at_ms 6000 vf_link_up rail0; }
blackhole() { vf_at_ms 3000 vf_blackhole rail0; vf_at_ms 6000 vf_unblackhole rail0; }
flapping() { vf_at_ms 1500 vf_flap_count "$flaps" "$flap_ms" rail0; }
alternating() { vf_at_ms 1500 vf_alternate_count "$events" "$flap_ms"; }

run "rail0 down 3 s" 10 large linkdown
d1=$VF_DIR
run "rail0 blackhole 3 s" 10 large blackhole
d2=$VF_DIR
# The injector's own overhead (ip, date) stretches each flap by a few ms: a quarter more time covers it.
run "$flaps flaps of rail0" $((flaps * flap_ms * 5 / 2000 + 5)) mixed flapping
d3=$VF_DIR
# Each event also waits for carrier on both ends of the repaired rail (tens of ms on veth): 3 periods each.
run "$events faults alternating between rail0 and rail1" $((events * flap_ms * 3 / 1000 + 5)) mixed alternating
d4=$VF_DIR

first_error() { cat "$1"/result.r*.json | sed -n 's/.*"first_error":"\([^"]\+\)".*/\1/p' | head -n 1; }
note_switch() { [ "$(worst "$1" path_switches)" -gt 0 ] 2>/dev/null || echo " (no path switch seen)"; }
cat <<TABLE
Fault benchmark: 2 ranks in network namespaces on one host, rails = veth pairs, UCX tcp (VCCL_UCX_TLS=tcp),
VCCL_FAILOVER=$VCCL_FAILOVER VCCL_FAILOVER_TIMEOUT_MS=$VCCL_FAILOVER_TIMEOUT_MS VCCL_FAILBACK_INTERVAL_MS=$VCCL_FAILBACK_INTERVAL_MS,
commit $(git -C "$src" rev-parse --short HEAD 2>/dev/null || echo unknown), $(date -u +%Y-%m-%d), \`contrib/bench-fault.sh --flaps $flaps --events $events --flap-ms $flap_ms\`

| Metric | Value | How |
|---|---|---|
| Link-down detection time | $(show "$(worst "$d1" detect_ms)" ms)$(note_switch "$d1") | \`ip link set rail0 down\` to the active path leaving rail0 (telemetry) |
| Blackhole detection time | $(show "$(worst "$d2" detect_ms)" ms)$(note_switch "$d2") | \`tc qdisc ... pfifo limit 0\` on rail0 (link stays up) to the switch |
| Stall after link down | $(show "$(worst "$d1" stall_at_fault_ms)" ms) | last completion before the fault to the first after it, 4 MiB allreduce |
| Stall after blackhole | $(show "$(worst "$d2" stall_at_fault_ms)" ms) | same, silent loss |
| Allreduce bandwidth, healthy | $(show "$(mean "$d1" bw_healthy_gbs)" GB/s) | 4 MiB float sum, algbw, before the fault |
| Allreduce bandwidth, on backup | $(show "$(mean "$d1" bw_faulted_gbs)" GB/s) | from the switch to the repair |
| Allreduce bandwidth, after repair | $(show "$(mean "$d1" bw_repaired_gbs)" GB/s) | from the failback on |
| Failback time after repair | $(show "$(worst "$d1" failback_ms)" ms) | \`ip link set rail0 up\` to traffic back on rail0 |
| Flap events applied | $(awk '$1 == "fault"' "$d3/timeline" | wc -l) of $flaps | down ${flap_ms} ms / up ${flap_ms} ms each |
| Flap events detected (median detection) | $(least "$d3" detected) ($(show "$(worst "$d3" detect_median_ms)" ms)) | per flap: active path left rail0 before it came back (the rank that saw fewer; slower median) |
| Wrong elements over the flaps | $(total "$d3" wrong) | every element of every allreduce and send/recv checked |
| Errors over the flaps | $(total "$d3" errors) | first: $(first_error "$d3") |
| Rail faults applied, alternating rails | $(awk '$1 == "fault"' "$d4/timeline" | wc -l) of $events | the rail in use down ${flap_ms} ms, up, ${flap_ms} ms to reconnect, then the other rail |
| Path switches seen | $(least "$d4" path_switches) | telemetry: changes of the path carrying traffic (the rank that saw fewer) |
| Longest stall over the rail faults | $(show "$(worst "$d4" max_stall_ms)" ms) | longest gap between completed operations |
| Wrong elements over the rail faults | $(total "$d4" wrong) | every element of every allreduce and send/recv checked |
| Errors over the rail faults | $(total "$d4" errors) | first: $(first_error "$d4") |
TABLE
for d in "${dirs[@]}"; do rm -rf "$d"; done
echo "(run log: $log)"
