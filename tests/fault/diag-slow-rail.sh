#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# vccl-diag sweep names a slow rail: 3 ranks, each in a network namespace of its own with one veth 'rail0'
# to a bridge in a fourth namespace (a switch), 10.77.0.1-3/24. Rank 2's rail0 is shaped to 200 Mbit/s with
# tbf, so the links 2 -> 0 and 2 -> 1 are slow (tbf shapes what a device sends). The sweep must flag
# exactly those, name rank 2 as the slowest rank and as the suspect, and exit 1. The same run writes
# telemetry files (VCCL_TELEMETRY_DIR), and vccl-telemetry report must flag rank 2's sends as slow too.
#
# mpirun cannot start ranks inside namespaces (DESIGN.md, testing recipes), so the ranks enter theirs with
# vccl-diag's testing option --netns-prefix after MPI_Init. Needs root and iproute2; skips (77) otherwise.
# The namespaces are removed on every exit.
top_builddir=${top_builddir:-.}
diag=$top_builddir/vccl-diag
skip() { echo "diag-slow-rail.sh: SKIP: $*"; exit 77; }

[ -x "$diag" ] || { echo "diag-slow-rail.sh: $diag not built" >&2; exit 99; }
[ "$(id -u)" = 0 ] || skip "needs root to create network namespaces"
command -v ip >/dev/null 2>&1 || skip "no 'ip' (iproute2)"
command -v tc >/dev/null 2>&1 || skip "no 'tc' (iproute2)"
command -v python3 >/dev/null 2>&1 || skip "no python3 to check the JSON"
: "${MPIRUN:=mpirun}"
command -v "$MPIRUN" >/dev/null 2>&1 || skip "no $MPIRUN"

ns=vdiag$$r       # rank namespaces vdiag<pid>r0..r2
br=vdiag$$br      # the switch
out=${TMPDIR:-/tmp}/diag-slow-rail.$$.json
tel=${TMPDIR:-/tmp}/diag-slow-rail.$$.tel
cleanup() {
    for r in 0 1 2; do ip netns del "$ns$r" 2>/dev/null; done
    ip netns del "$br" 2>/dev/null
    rm -rf "$out" "$tel"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

ip netns add "$br" 2>/dev/null || skip "cannot create network namespaces (ip netns add failed)"
ip netns exec "$br" ip link add br0 type bridge || skip "no bridge support"
ip netns exec "$br" ip link set br0 up
for r in 0 1 2; do
    ip netns add "$ns$r" || exit 99
    ip link add rail0 netns "$ns$r" type veth peer name v$r netns "$br" || skip "no veth support"
    ip netns exec "$br" ip link set v$r master br0 || exit 99
    ip netns exec "$br" ip link set v$r up || exit 99
    ip netns exec "$ns$r" ip addr add 10.77.0.$((r + 1))/24 dev rail0 || exit 99
    ip netns exec "$ns$r" ip link set rail0 up || exit 99
    ip netns exec "$ns$r" ip link set lo up || exit 99
done
ip netns exec "${ns}2" tc qdisc replace dev rail0 root tbf rate 200mbit burst 32kbit latency 50ms ||
    skip "no tbf qdisc"
# Bridge ports forward once they leave the 'learning' state; with ping at hand, wait for it explicitly.
if command -v ping >/dev/null 2>&1; then
    for r in 1 2; do
        ip netns exec "${ns}0" ping -c 1 -W 5 10.77.0.$((r + 1)) >/dev/null ||
            { echo "diag-slow-rail.sh: no path 10.77.0.1 -> 10.77.0.$((r + 1))" >&2; exit 99; }
    done
fi

mkdir -p "$tel" || exit 99
VCCL_UCX_TLS=tcp VCCL_NET_DEVICES=rail0 VCCL_BACKUP_NET_DEVICES=none VCCL_TELEMETRY_SHM=0 VCCL_TELEMETRY_DIR=$tel \
    timeout -k 10 240 "$MPIRUN" --allow-run-as-root --oversubscribe --bind-to none --mca pml ob1 \
    --mca btl self,vader -x VCCL_UCX_TLS -x VCCL_NET_DEVICES -x VCCL_BACKUP_NET_DEVICES -x VCCL_TELEMETRY_SHM \
    -x VCCL_TELEMETRY_DIR \
    -np 3 "$diag" sweep --json -b 4M -n 3 --netns-prefix "$ns" >"$out"
rc=$?
cat "$out"
[ "$rc" = 1 ] || { echo "diag-slow-rail.sh: expected exit status 1 (findings), got $rc" >&2; exit 1; }
python3 - "$out" <<'PY' || exit 1
import json, sys
d = json.load(open(sys.argv[1]))["sweep"]
slow = sorted((l["src"], l["dst"]) for l in d["slow_links"])
assert slow == [(2, 0), (2, 1)], "slow links %s, expected 2->0 and 2->1" % slow
assert d["slowest_rank"]["rank"] == 2, "slowest rank %s" % d["slowest_rank"]
assert d["suspect_rank"] == 2, "suspect rank %s" % d["suspect_rank"]
assert d["slowest_link"]["src"] == 2, "slowest link %s" % d["slowest_link"]
# 200 Mbit/s is 25 MB/s: the shaped links must show it (TCP over tbf reaches a little less).
for l in d["slow_links"]:
    assert 5e6 < l["bw"] < 30e6, "shaped link at %.0f B/s" % l["bw"]
print("diag-slow-rail.sh: slow links 2->0, 2->1 flagged; rank 2 named")
PY

# The files of the same run: report's per-link bandwidth (bytes over busy time) must single out rank 2's
# sends, and every link it flags must touch rank 2.
"$top_builddir/vccl-telemetry" report --json "$tel"/*.jsonl >"$out" ||
    { echo "diag-slow-rail.sh: vccl-telemetry report failed" >&2; exit 1; }
python3 - "$out" <<'PY' || exit 1
import json, sys
d = json.load(open(sys.argv[1]))
slow = [(l["rank"], l["dir"], l["peer"]) for l in d["links"] if l["slow"]]
assert (2, "send", 0) in slow and (2, "send", 1) in slow, "report flags %s, expected rank 2's sends" % slow
assert all(2 in (r, p) for r, _, p in slow), "report flags links without rank 2: %s" % slow
print("diag-slow-rail.sh: vccl-telemetry report flags %s" % slow)
PY
