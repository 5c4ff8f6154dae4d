# SPDX-License-Identifier: BSD-3-Clause
# tests/fault/netns.sh - network namespaces with two rails between two ranks, and link faults on them.
# Sourced (bash) by the fault tests and contrib/bench-fault.sh; needs root and iproute2 (ip, tc).
#
#   vf_setup          namespaces ${VF_PREFIX}r0 and ${VF_PREFIX}r1, each with lo, rail0 (10.81.0.R+1/24)
#                     and rail1 (10.82.0.R+1/24): two veth pairs, the same device names in every namespace
#                     so that one VCCL_NET_DEVICES value serves both ranks. Exits 77 when it cannot.
#                     VF_NRANKS=N (> 2): namespaces r0 .. rN-1, each rail a bridge in a hub namespace
#                     ${VF_PREFIX}h with one veth per rank (a switch per rail); faults still hit rank 0's end
#                     only, so the other ranks keep seeing their own rails up.
#   vf_cleanup        deletes this run's namespaces (veths go with them); installed as trap on EXIT INT TERM.
#   fault helpers     vf_link_down/up, vf_blackhole/vf_unblackhole, vf_slow/vf_unslow, vf_flap, vf_both_down/up.
#                     Each records "fault NAME NS" or "repair NAME NS" with the wall-clock time in
#                     $VF_TIMELINE (when set) right after the change took effect, for the worker's analysis.
#
# The names carry the shell's PID so that parallel runs never collide, and a run that was killed -9
# leaves namespaces a later run recognises (dead PID) and removes.

. "$(dirname "${BASH_SOURCE[0]}")/../common/netns-lib.sh"

VF_PREFIX=${VF_PREFIX:-vf$$}
VF_NS0=${VF_PREFIX}r0
VF_NS1=${VF_PREFIX}r1
VF_NSH=${VF_PREFIX}h
VF_NRANKS=${VF_NRANKS:-2}
VF_TIMELINE=${VF_TIMELINE:-}

vf_skip() {
    echo "SKIP: $*"
    exit 77
}

# Wall clock in ns: the worker compares these with its own CLOCK_REALTIME stamps (same host).
vf_now_ns() { date +%s%N; }

vf_mark() { # vf_mark WORDS...: one timeline line "WORDS... TIME_NS"
    [ -n "$VF_TIMELINE" ] && echo "$* $(vf_now_ns)" >>"$VF_TIMELINE"
    return 0
}
# vf_mark_at TIME_NS WORDS...: the same with a time taken earlier. Faults are stamped with the time just
# before the command that makes them: vccl may react (netlink) before the command has even returned.
vf_mark_at() {
    local t=$1
    shift
    [ -n "$VF_TIMELINE" ] && echo "$* $t" >>"$VF_TIMELINE"
    return 0
}

# Removes namespaces vf<PID>r<N> and vf<PID>h whose PID is no longer alive (left by runs that were killed).
vf_cleanup_stale() { ns_cleanup_stale vf; }

vf_cleanup() {
    local r
    for r in $(seq 0 $((VF_NRANKS - 1))); do ip netns delete "${VF_PREFIX}r$r" 2>/dev/null; done
    ip netns delete "$VF_NSH" 2>/dev/null
    return 0
}

# VF_NRANKS > 2: every rank's rail K is a veth into bridge brK of the hub namespace. Returns 77 for a skip.
vf_setup_switched() {
    local r k ns
    ip netns add "$VF_NSH" 2>/dev/null || return 77
    for k in 0 1; do
        ip -n "$VF_NSH" link add "br$k" type bridge 2>/dev/null || return 77
        ip -n "$VF_NSH" link set "br$k" up || return 1
    done
    for r in $(seq 0 $((VF_NRANKS - 1))); do
        ns=${VF_PREFIX}r$r
        [ "$r" -lt 2 ] || ip netns add "$ns" 2>/dev/null || return 77
        for k in 0 1; do
            ip link add "rail$k" netns "$ns" type veth peer name "v${r}k$k" netns "$VF_NSH" 2>/dev/null || return 77
            ip -n "$VF_NSH" link set "v${r}k$k" master "br$k" && ip -n "$VF_NSH" link set "v${r}k$k" up &&
                ip -n "$ns" addr add "10.8$((k + 1)).0.$((r + 1))/24" dev "rail$k" &&
                ip -n "$ns" link set "rail$k" up || return 1
        done
        ip -n "$ns" link set lo up || return 1
    done
    for r in $(seq 0 $((VF_NRANKS - 1))); do
        for k in 0 1; do vf_wait_running "${VF_PREFIX}r$r" "rail$k" || return 1; done
    done
    for r in $(seq 1 $((VF_NRANKS - 1))); do
        for k in 0 1; do vf_reachable "$VF_NS0" "10.8$((k + 1)).0.$((r + 1))" || return 1; done
    done
    return 0
}

vf_setup() {
    [ "$(id -u)" -eq 0 ] || vf_skip "link fault tests need root (network namespaces, veth, tc)"
    command -v ip >/dev/null 2>&1 && command -v tc >/dev/null 2>&1 || vf_skip "iproute2 (ip, tc) not installed"
    vf_cleanup_stale
    trap 'vf_cleanup' EXIT
    # A signal ends the script too: EXIT then runs the cleanup once more (harmless).
    trap 'vf_cleanup; exit 130' INT
    trap 'vf_cleanup; exit 143' TERM
    if ! ip netns add "$VF_NS0" 2>/dev/null || ! ip netns add "$VF_NS1" 2>/dev/null; then
        vf_cleanup
        vf_skip "cannot create network namespaces (ip netns add failed: no CAP_SYS_ADMIN or no /var/run/netns)"
    fi
    local r
    if [ "$VF_NRANKS" -gt 2 ]; then
        vf_setup_switched
        case $? in
            0) return 0 ;;
            77) vf_cleanup; vf_skip "cannot build the switched rails (namespaces, bridges or veth pairs)" ;;
            *) vf_cleanup; echo "netns.sh: the switched rails for $VF_NRANKS ranks do not work" >&2; exit 99 ;;
        esac
    fi
    for r in 0 1; do
        # Created directly inside the namespaces, so the fixed names never clash in the root namespace.
        ip link add "rail$r" netns "$VF_NS0" type veth peer name "rail$r" netns "$VF_NS1" ||
            { vf_cleanup; vf_skip "cannot create veth pairs"; }
        ip -n "$VF_NS0" addr add "10.8$((r + 1)).0.1/24" dev "rail$r" &&
            ip -n "$VF_NS1" addr add "10.8$((r + 1)).0.2/24" dev "rail$r" &&
            ip -n "$VF_NS0" link set "rail$r" up && ip -n "$VF_NS1" link set "rail$r" up ||
            { vf_cleanup; echo "netns.sh: configuring rail$r failed" >&2; exit 99; }
    done
    ip -n "$VF_NS0" link set lo up && ip -n "$VF_NS1" link set lo up || { vf_cleanup; exit 99; }
    # The kernel reports carrier (operstate UP, IFF_RUNNING) through linkwatch, up to a second late; UCX
    # ignores a device that is not running yet, so wait for all four ends.
    vf_wait_running "$VF_NS0" rail0 && vf_wait_running "$VF_NS0" rail1 && vf_wait_running "$VF_NS1" rail0 &&
        vf_wait_running "$VF_NS1" rail1 || { vf_cleanup; echo "netns.sh: rails never came up" >&2; exit 99; }
    # Both rails must actually pass traffic before any test means anything.
    for r in 0 1; do
        vf_reachable "$VF_NS0" "10.8$((r + 1)).0.2" ||
            { vf_cleanup; echo "netns.sh: rail$r does not reach the other namespace" >&2; exit 99; }
    done
}

vf_wait_running() { ns_wait_carrier "$@"; } # vf_wait_running NS DEV: waits up to 5 s for operstate UP

# vf_reachable NS ADDR: true when ADDR answers from NS. ping is often not installed, so a TCP connect to
# the discard port stands in: "connection refused" proves a round trip as well as a ping does.
vf_reachable() {
    local err
    err=$(ip netns exec "$1" timeout 2 bash -c "exec 3<>/dev/tcp/$2/9" 2>&1) && return 0
    case $err in *refused*) return 0 ;; esac
    return 1
}

vf_tx_bytes() { ns_tx_bytes "$@"; } # vf_tx_bytes NS DEV: bytes sent so far by DEV in NS

# --- faults. DEV defaults to rail0. "Both ends" matters: a qdisc only acts on packets a side sends. ---

vf_link_down() {
    local t
    t=$(vf_now_ns)
    ip -n "$VF_NS0" link set "${1:-rail0}" down && vf_mark_at "$t" fault link-down "${1:-rail0}"
}
vf_link_up() {
    local t
    t=$(vf_now_ns)
    ip -n "$VF_NS0" link set "${1:-rail0}" up && vf_mark_at "$t" repair link-up "${1:-rail0}"
}

# Silent loss: the link stays up (no netlink event, no carrier loss) and every packet is dropped, both ways.
vf_blackhole() {
    local t
    t=$(vf_now_ns)
    tc -n "$VF_NS0" qdisc replace dev "${1:-rail0}" root pfifo limit 0 &&
        tc -n "$VF_NS1" qdisc replace dev "${1:-rail0}" root pfifo limit 0 &&
        vf_mark_at "$t" fault blackhole "${1:-rail0}"
}
vf_unblackhole() {
    local t
    t=$(vf_now_ns)
    tc -n "$VF_NS0" qdisc del dev "${1:-rail0}" root 2>/dev/null
    tc -n "$VF_NS1" qdisc del dev "${1:-rail0}" root 2>/dev/null
    vf_mark_at "$t" repair unblackhole "${1:-rail0}"
}

vf_slow() {
    local t
    t=$(vf_now_ns)
    tc -n "$VF_NS0" qdisc replace dev "${1:-rail0}" root tbf rate 100mbit burst 32kbit latency 100ms &&
        tc -n "$VF_NS1" qdisc replace dev "${1:-rail0}" root tbf rate 100mbit burst 32kbit latency 100ms &&
        vf_mark_at "$t" fault slow "${1:-rail0}"
}
vf_unslow() {
    local t
    t=$(vf_now_ns)
    tc -n "$VF_NS0" qdisc del dev "${1:-rail0}" root 2>/dev/null
    tc -n "$VF_NS1" qdisc del dev "${1:-rail0}" root 2>/dev/null
    vf_mark_at "$t" repair unslow "${1:-rail0}"
}

# vf_flap SECONDS [PERIOD_MS] [DEV]: rail down and up, one change every PERIOD_MS (default 200), for SECONDS;
# ends with the rail up. Also stops early when the file $VF_STOP_FILE appears (the worker has exited).
vf_flap() {
    local end period=${2:-200} dev=${3:-rail0}
    end=$(($(vf_now_ns) + $1 * 1000000000))
    while [ "$(vf_now_ns)" -lt "$end" ]; do
        [ -n "${VF_STOP_FILE:-}" ] && [ -e "$VF_STOP_FILE" ] && break
        vf_link_down "$dev"
        sleep "$(vf_ms_to_s "$period")"
        vf_link_up "$dev"
        sleep "$(vf_ms_to_s "$period")"
    done
}

# vf_flap_count N [PERIOD_MS] [DEV]: N down/up cycles (each state PERIOD_MS long, default 100), for benchmarks
# that count fault events rather than seconds. Stops early like vf_flap.
vf_flap_count() {
    local i period=${2:-100} dev=${3:-rail0}
    for i in $(seq "$1"); do
        [ -n "${VF_STOP_FILE:-}" ] && [ -e "$VF_STOP_FILE" ] && break
        vf_link_down "$dev"
        sleep "$(vf_ms_to_s "$period")"
        vf_link_up "$dev"
        sleep "$(vf_ms_to_s "$period")"
    done
}

# vf_alternate_count N [PERIOD_MS]: N faults that each hit the rail carrying traffic: rail0 down, up again
# PERIOD_MS later; once both of its ends report carrier again (the kernel's linkwatch takes up to a second
# on veth) PERIOD_MS more to reconnect, then the same for rail1, and so on. Every fault forces a real switch
# (the other rail is healthy by then), so N faults are N failovers, unlike flapping one rail, after which
# vccl's failback hold keeps traffic on the backup. Stops early like vf_flap.
vf_alternate_count() {
    local i period=${2:-100} dev
    for i in $(seq "$1"); do
        [ -n "${VF_STOP_FILE:-}" ] && [ -e "$VF_STOP_FILE" ] && break
        dev=rail$(((i - 1) % 2))
        vf_link_down "$dev"
        sleep "$(vf_ms_to_s "$period")"
        vf_link_up "$dev"
        vf_wait_running "$VF_NS0" "$dev" && vf_wait_running "$VF_NS1" "$dev"
        sleep "$(vf_ms_to_s "$period")"
    done
}

vf_both_down() {
    local t
    t=$(vf_now_ns)
    # One process for both links: on a crowded machine each command can wait for a processor.
    printf 'link set rail0 down\nlink set rail1 down\n' | ip -n "$VF_NS0" -batch - &&
        vf_mark_at "$t" fault both-down rail0,rail1
}
# Both rails silently dead (links up, every packet dropped both ways); one timeline mark.
vf_both_blackhole() {
    local t ns
    t=$(vf_now_ns)
    # One tc per namespace for both rails: rank 0's side going silent on both at once is already the whole
    # fault for both ranks. Four separate commands once took 2.7 s on a crowded CI machine, and the ranks saw
    # rail 1 die that much after the mark (error "5009 ms after the fault").
    for ns in "$VF_NS0" "$VF_NS1"; do
        printf 'qdisc replace dev rail0 root pfifo limit 0\nqdisc replace dev rail1 root pfifo limit 0\n' |
            tc -n "$ns" -batch - || return 1
    done
    vf_mark_at "$t" fault both-blackhole rail0,rail1
}
vf_both_up() {
    local t
    t=$(vf_now_ns)
    ip -n "$VF_NS0" link set rail0 up && ip -n "$VF_NS0" link set rail1 up && vf_mark_at "$t" repair both-up rail0,rail1
}

vf_ms_to_s() { printf '%d.%03d' $(($1 / 1000)) $(($1 % 1000)); }
