#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# contrib/bench-hosts.sh - two-level against flat collectives across emulated hosts, in one run.
#
# Builds emulated hosts (tests/hosts/hosts-common.sh; LAYOUT, default "2 2": 2 hosts x 2 ranks): a network
# namespace and host name per host, one veth rail per local rank, both ends of every rail limited by tc tbf to
# VH_RATE (default 1gbit). Then runs vccl-perf --emulated-hosts on them, first with the flat algorithms forced by
# name (VCCL_ALGO=...:ring, recursive_doubling for the small allreduce), then with the default choice (two-level
# across these hosts):
#   allreduce, allgather, reducescatter from BIG_MIN to BIG_MAX (default 16M-256M, factor 4), and allreduce from
#   SMALL_MIN to SMALL_MAX (default 8-64K, factor SMALL_FACTOR, default 2),
# and prints vccl-perf's out-of-place times side by side with the ratio flat/two-level (> 1: two-level is faster),
# and the bytes each rail sent during each run. Every run verifies its results (-c 1); a wrong element fails it.
# Needs root, iproute2, MPI and a build (BUILD_DIR, default build/). Also ITERS (default 3), SMALL_ITERS (200).
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$top/build}
VH_PROGRAM=$build/vccl-perf
VH_HARD_TIMEOUT=${VH_HARD_TIMEOUT:-900} # each vccl-perf run; 256 MiB flat at 1gbit takes ~4 s an iteration
. "$top/tests/hosts/hosts-common.sh"
LAYOUT=${LAYOUT:-2 2}
ITERS=${ITERS:-3}
SMALL_ITERS=${SMALL_ITERS:-200}
vh_setup "$LAYOUT"
results=$VH_DIR/results
: >"$results"

rails_total() { # every rail's tx bytes: "h0r0=N h0r1=N ..."
    local h g out=
    for h in $(seq 0 $((${#VH_LAYOUT[@]} - 1))); do
        for g in $(seq 0 $((VH_LAYOUT[h] - 1))); do out+="h${h}r$g=$(vh_rail_tx "$h" "$g") "; done
    done
    echo "$out"
}
rails_delta() { # rails_delta BEFORE AFTER: the bytes each rail sent in between, in MB
    local out= b a k
    for a in $2; do
        k=${a%%=*}
        for b in $1; do [ "${b%%=*}" = "$k" ] && out+="$k=$(( (${a#*=} - ${b#*=}) / 1000000 ))MB "; done
    done
    echo "$out"
}

run() { # run LABEL ALGO_SPEC COLL VCCL-PERF-OPTIONS...
    local label=$1 spec=$2 coll=$3 before after
    shift 3
    before=$(rails_total)
    if ! VCCL_ALGO=$spec vh_mpirun "$VH_PROGRAM" --emulated-hosts "$VH_PREFIX:$(vh_hosts_arg)" -c 1 "$@" "$coll"; then
        echo "bench-hosts: the $label $coll run failed:" >&2
        cat "$VH_OUT" >&2
        exit 1
    fi
    after=$(rails_total)
    # Data rows: size count type redop root time algbw busbw #wrong ...; a wrong element is a failure.
    awk -v l="$label" -v c="$coll" '$1 ~ /^[0-9]+$/ && NF >= 9 {
        if ($9 != 0) { print "bench-hosts: " l " " c " " $1 " B: " $9 " wrong elements" > "/dev/stderr"; bad = 1 }
        print l, c, $1, $6 } END { exit bad }' "$VH_OUT" >>"$results" || exit 1
    echo "bench-hosts: $label $coll: rail bytes $(rails_delta "$before" "$after")"
}

echo "bench-hosts: layout '$LAYOUT', rails at $VH_RATE, $ITERS iterations (small sizes: $SMALL_ITERS)"
for coll in allreduce allgather reducescatter; do
    run flat "$coll:ring" "$coll" -b "${BIG_MIN:-16M}" -e "${BIG_MAX:-256M}" -f 4 -n "$ITERS" -w 1
    run twolevel "" "$coll" -b "${BIG_MIN:-16M}" -e "${BIG_MAX:-256M}" -f 4 -n "$ITERS" -w 1
done
run flat "allreduce:recursive_doubling" allreduce -b "${SMALL_MIN:-8}" -e "${SMALL_MAX:-64K}" -f "${SMALL_FACTOR:-2}" -n "$SMALL_ITERS" -w 20
run twolevel "" allreduce -b "${SMALL_MIN:-8}" -e "${SMALL_MAX:-64K}" -f "${SMALL_FACTOR:-2}" -n "$SMALL_ITERS" -w 20

printf '%-14s %12s %14s %14s %8s\n' collective bytes flat_us twolevel_us ratio
awk '$1 == "flat" { k = $2 " " $3; if (!(k in f)) order[++n] = k; f[k] = $4 }
     $1 == "twolevel" { t[$2 " " $3] = $4 }
     END { for (i = 1; i <= n; ++i) { k = order[i]; split(k, p, " ");
             printf "%-14s %12s %14.1f %14.1f %8.2f\n", p[1], p[2], f[k], t[k], (t[k] > 0 ? f[k] / t[k] : 0) } }' "$results"
