# SPDX-License-Identifier: BSD-3-Clause
# tests/hosts/hosts-common.sh - emulated hosts on one machine, sourced (bash) by the hosts-*.sh tests and by
# contrib/bench-hosts.sh. Needs root and iproute2 (ip, tc).
#
#   vh_setup "G0 G1 ..."   one network namespace per emulated host ${VH_PREFIX}<h> with G_h ranks, and a fabric
#                          namespace ${VH_PREFIX}f holding one bridge. Local rank g of every host has its own
#                          rail: veth rail<g> in the host (10.90.<g>.<h+1>/24) into the bridge, so rail g of all
#                          hosts share one segment (a rail switch) and the bridge joins the rails (the spine).
#                          Both ends of every rail are limited by tc tbf to $VH_RATE (default 1gbit), so the
#                          emulated network, not the processors, bounds what crosses hosts. Exits 77 (skip)
#                          when not root or ip/tc are missing. Installs vh_cleanup on EXIT INT TERM.
#   vh_hosts_arg           the worker's --hosts value: each rank's host index (ranks of a host contiguous).
#   vh_mpirun PROGRAM ARGS...  runs PROGRAM on every rank (mpirun, under a hard timeout), output in $VH_OUT;
#                          PROGRAM enters its emulated host itself (hosts_worker --netns-prefix/--hosts,
#                          vccl-perf --emulated-hosts ${VH_PREFIX}:$(vh_hosts_arg)).
#   vh_run [ARGS...]       vh_mpirun of hosts_worker (ARGS: more worker options, e.g. --seconds S).
#   VH_BACKUP_NET_DEVICES  a backup rail per local rank (VCCL_BACKUP_NET_DEVICES form): failover between hosts;
#                          default none (one path per peer, VCCL_FAILOVER=off).
#   vh_judge_ranks MIN     every rank reported, from an emulated host, more than MIN cases, nothing wrong or failed.
#   vh_rail_tx H G         bytes sent so far on rail G of host H (from the host's side).
#   vh_cleanup             deletes this run's namespaces (the veths go with them).
#
# The ranks of one emulated host share a network namespace and a host name (each enters its own UTS namespace
# and sets it, hosts_worker.cc), so vccl groups them as one host; UCX's tcp transport, bound to rail devices,
# carries all traffic (VCCL_UCX_TLS=tcp): inside a host over loopback, between hosts over the rails.
. "$(dirname "${BASH_SOURCE[0]}")/../common/netns-lib.sh"

VH_PREFIX=${VH_PREFIX:-vh$$x} # "x" ends the PID: runs side by side (make -j) must tell theirs apart
VH_RATE=${VH_RATE:-1gbit}
VH_FAB=${VH_PREFIX}f
VH_WORKER=${VH_WORKER:-${top_builddir:-.}/tests/hosts/hosts_worker}
: "${MPIRUN:=mpirun}"
VH_LAYOUT=()

vh_skip() {
    echo "SKIP: $*"
    exit 77
}

vh_cleanup() {
    local h
    for h in $(seq 0 $((${#VH_LAYOUT[@]} - 1))); do ip netns delete "${VH_PREFIX}$h" 2>/dev/null; done
    ip netns delete "$VH_FAB" 2>/dev/null
    [ -n "${VH_DIR:-}" ] && rm -rf "$VH_DIR"
    return 0
}

vh_cleanup_stale() { ns_cleanup_stale vh; } # namespaces vh<PID>x... whose PID is gone (a run killed -9)
vh_wait_up() { ns_wait_carrier "$@"; }      # vh_wait_up NS DEV: UCX skips a device without carrier

vh_shape() { # vh_shape NS DEV: the rail's rate limit on the packets DEV sends
    tc -n "$1" qdisc replace dev "$2" root tbf rate "$VH_RATE" burst 256kb latency 50ms
}

# vh_route NS G ADDR: what rail G's address sends leaves on rail G, to any rail of any host (a rail's /24 alone
# would send the packets for another rail's subnet out of that rail's device, or nowhere from a socket bound to
# the device): a /16 over the fabric per rail, chosen by source address.
vh_route() {
    ip -n "$1" rule add from "$3" table $((100 + $2)) &&
        ip -n "$1" route add 10.90.0.0/16 dev "rail$2" src "$3" table $((100 + $2)) &&
        ip -n "$1" route add 10.90.0.0/16 dev "rail$2" src "$3" metric $((100 + $2))
}

vh_setup() {
    [ "$(id -u)" -eq 0 ] || vh_skip "emulated hosts need root (network and UTS namespaces, veth, tc)"
    command -v ip >/dev/null 2>&1 && command -v tc >/dev/null 2>&1 || vh_skip "iproute2 (ip, tc) not installed"
    [ -x "${VH_PROGRAM:-$VH_WORKER}" ] || vh_skip "${VH_PROGRAM:-$VH_WORKER} not built (needs MPI)"
    command -v "${MPIRUN%% *}" >/dev/null 2>&1 || vh_skip "mpirun not found"
    read -r -a VH_LAYOUT <<<"$1"
    vh_cleanup_stale
    trap 'vh_cleanup' EXIT
    trap 'vh_cleanup; exit 130' INT
    trap 'vh_cleanup; exit 143' TERM
    ip netns add "$VH_FAB" 2>/dev/null || vh_skip "cannot create network namespaces (ip netns add failed)"
    ip -n "$VH_FAB" link add fab type bridge && ip -n "$VH_FAB" link set fab up || vh_skip "cannot create a bridge"
    local h g ns
    for h in $(seq 0 $((${#VH_LAYOUT[@]} - 1))); do
        ns=${VH_PREFIX}$h
        ip netns add "$ns" || vh_skip "cannot create network namespace $ns"
        ip -n "$ns" link set lo up
        # One interface answers for its own address only: the rails share one segment.
        ip netns exec "$ns" sysctl -qw net.ipv4.conf.all.arp_ignore=1 net.ipv4.conf.all.arp_announce=2 >/dev/null
        for g in $(seq 0 $((VH_LAYOUT[h] - 1))); do
            ip link add "rail$g" netns "$ns" type veth peer name "h${h}r$g" netns "$VH_FAB" || vh_skip "cannot create veth pairs"
            ip -n "$VH_FAB" link set "h${h}r$g" master fab && ip -n "$VH_FAB" link set "h${h}r$g" up &&
                ip -n "$ns" addr add "10.90.$g.$((h + 1))/24" dev "rail$g" && ip -n "$ns" link set "rail$g" up &&
                vh_shape "$ns" "rail$g" && vh_shape "$VH_FAB" "h${h}r$g" &&
                vh_route "$ns" "$g" "10.90.$g.$((h + 1))" ||
                { echo "hosts-common.sh: configuring rail $g of host $h failed" >&2; exit 99; }
        done
    done
    for h in $(seq 0 $((${#VH_LAYOUT[@]} - 1))); do
        for g in $(seq 0 $((VH_LAYOUT[h] - 1))); do
            vh_wait_up "${VH_PREFIX}$h" "rail$g" || { echo "hosts-common.sh: rail $g of host $h never came up" >&2; exit 99; }
        done
    done
    local max=0
    for g in "${VH_LAYOUT[@]}"; do [ "$g" -gt "$max" ] && max=$g; done
    VH_NET_DEVICES=rail0
    for g in $(seq 1 $((max - 1))); do VH_NET_DEVICES+=",rail$g"; done
    VH_DIR=$(mktemp -d "${TMPDIR:-/tmp}/vccl-hosts.XXXXXX") || exit 99
    VH_OUT=$VH_DIR/out.log
}

vh_hosts_arg() {
    local h g out=
    for h in $(seq 0 $((${#VH_LAYOUT[@]} - 1))); do
        for g in $(seq 1 "${VH_LAYOUT[h]}"); do out+="${out:+,}$h"; done
    done
    echo "$out"
}

vh_nranks() {
    local n=0 g
    for g in "${VH_LAYOUT[@]}"; do n=$((n + g)); done
    echo "$n"
}

vh_rail_tx() { ns_tx_bytes "${VH_PREFIX}$1" "rail$2"; }

vh_mpirun() {
    # Local rank g takes rail g (VCCL_NET_DEVICES entry g); one path per peer unless VH_BACKUP_NET_DEVICES names
    # a backup rail per local rank (then failover between hosts, VCCL_FAILOVER=auto); a hung collective becomes
    # an error.
    local backup=${VH_BACKUP_NET_DEVICES:-none} failover=off
    [ "$backup" != none ] && failover=auto
    VCCL_NET_DEVICES=$VH_NET_DEVICES VCCL_BACKUP_NET_DEVICES=$backup VCCL_FAILOVER=$failover VCCL_UCX_TLS=tcp \
        VCCL_TELEMETRY_SHM=0 VCCL_OP_TIMEOUT_MS=${VCCL_OP_TIMEOUT_MS:-30000} \
        timeout -k 5 "${VH_HARD_TIMEOUT:-120}" $MPIRUN --allow-run-as-root --oversubscribe --bind-to none \
        --mca pml ob1 --mca btl self,vader -np "$(vh_nranks)" "$@" >"$VH_OUT" 2>&1
}

vh_run() { vh_mpirun "$VH_WORKER" --netns-prefix "$VH_PREFIX" --hosts "$(vh_hosts_arg)" "$@"; }

# vh_judge_ranks MIN_CASES [HINT]: after vh_run, every rank reported, from an emulated host, more than MIN_CASES
# cases, none wrong and no call failed. Prints a FAIL line per finding (HINT follows the case count); 1 if any.
vh_judge_ranks() {
    local min=$1 hint=${2:+ ($2)} bad=0 n rank host cases wrong errors first
    n=$(vh_nranks)
    [ "$(grep -c '^HOSTS_CHECK ' "$VH_OUT")" -eq "$n" ] || { echo "FAIL: not every one of $n ranks reported"; bad=1; }
    while read -r _ _ rank _ host _ cases _ wrong _ errors _ first; do
        case $host in "${VH_PREFIX}"[0-9]*) ;; *) echo "FAIL: rank $rank runs on host '$host', not an emulated one"; bad=1 ;; esac
        [ "$cases" -gt "$min" ] || { echo "FAIL: rank $rank ran only $cases cases$hint"; bad=1; }
        [ "$wrong" -eq 0 ] && [ "$errors" -eq 0 ] || { echo "FAIL: rank $rank: $wrong wrong, $errors errors; first: $first"; bad=1; }
    done < <(grep '^HOSTS_CHECK ' "$VH_OUT")
    return "$bad"
}
