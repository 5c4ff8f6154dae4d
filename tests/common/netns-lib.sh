# SPDX-License-Identifier: BSD-3-Clause
# tests/common/netns-lib.sh - network namespace helpers shared by tests/fault/netns.sh and
# tests/hosts/hosts-common.sh (sourced by them, bash). Needs iproute2.
#
#   ns_wait_carrier NS DEV    waits up to 5 s for DEV in NS to report carrier (operstate UP). The kernel reports
#                             it through linkwatch, up to a second after "link set up"; UCX ignores a device
#                             that is not running yet, so tests wait before they start.
#   ns_tx_bytes NS DEV        bytes DEV in NS has sent so far.
#   ns_cleanup_stale TAG      deletes namespaces named TAG<PID><more> (a run's names carry its shell's PID)
#                             whose PID is no longer alive: what a run killed with -9 left behind.

ns_wait_carrier() {
    local i
    for i in $(seq 50); do
        ip -n "$1" link show "$2" 2>/dev/null | grep -q 'state UP' && return 0
        sleep 0.1
    done
    return 1
}

ns_tx_bytes() {
    ip -n "$1" -s -j link show "$2" 2>/dev/null | sed -n 's/.*"tx":{"bytes":\([0-9]*\).*/\1/p'
}

ns_cleanup_stale() {
    local tag=$1 ns rest pid
    for ns in $(ip netns list 2>/dev/null | awk '{print $1}'); do
        case $ns in "$tag"[0-9]*) ;; *) continue ;; esac
        rest=${ns#"$tag"}
        pid=${rest%%[!0-9]*}
        # The PID must be followed by more of the name: a bare TAG<digits> is not one of ours.
        [ -n "$pid" ] && [ "$pid" != "$rest" ] || continue
        if ! kill -0 "$pid" 2>/dev/null; then
            ip netns delete "$ns" 2>/dev/null && echo "netns-lib.sh: removed stale namespace $ns"
        fi
    done
    return 0
}
