# SPDX-License-Identifier: BSD-3-Clause
# tests/fault/fault-common.sh - sourced (bash) by the fault-*.sh tests and contrib/bench-fault.sh.
#
# vf_start DURATION_S [MODE]   sets up the namespaces, starts fault_worker on VF_NRANKS ranks (default 2; more
#                              share switched rails, netns.sh) in the background (under
#                              a hard timeout) and waits for its "started" marker.
# vf_at_ms MS COMMAND...       runs COMMAND MS milliseconds after "started" (skipped once the worker is gone).
# vf_finish                    marks the end of the schedule, waits for the worker, prints its output.
# vf_check ok|remote-error     judges both ranks' results and exits 0 (pass) or 1 (fail).
#
# Settings (environment): VF_WORKER (the binary), MPIRUN, VF_HARD_TIMEOUT (s, whole job), VF_MAX_STALL_MS
# (longest allowed gap between completed operations), VF_MEMORY (host or cuda: fault_worker --memory), VF_MIN_SWITCHES (fewest path switches each rank's
# telemetry must see), VF_KEEP=1 keeps the run folder. The failover variables
# are given values suited to short runs; a caller's own values win.
VF_HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$VF_HERE/netns.sh"

VF_WORKER=${VF_WORKER:-${top_builddir:-.}/tests/fault/fault_worker}
: "${MPIRUN:=mpirun}"
export VCCL_NET_DEVICES=${VCCL_NET_DEVICES:-rail0}
export VCCL_BACKUP_NET_DEVICES=${VCCL_BACKUP_NET_DEVICES:-rail1}
export VCCL_UCX_TLS=${VCCL_UCX_TLS:-tcp}
# Ranks in namespaces share a host name: "auto" would not protect them.
export VCCL_FAILOVER=${VCCL_FAILOVER:-on}
export VCCL_FAILOVER_TIMEOUT_MS=${VCCL_FAILOVER_TIMEOUT_MS:-250}
export VCCL_FAILBACK_INTERVAL_MS=${VCCL_FAILBACK_INTERVAL_MS:-500}
export VCCL_PEER_TIMEOUT_MS=${VCCL_PEER_TIMEOUT_MS:-10000}
# Without failover an operation on a dead link would wait 10 minutes; this turns it into a prompt error.
export VCCL_OP_TIMEOUT_MS=${VCCL_OP_TIMEOUT_MS:-6000}
# A killed run must not leave shared-memory rings behind.
export VCCL_TELEMETRY_SHM=${VCCL_TELEMETRY_SHM:-0}

vf_fail_reasons=()
vf_fail() { vf_fail_reasons+=("$*"); }

# Under make check (top_builddir set) a test also writes a one-case gtest-style report, so that
# contrib/ci/summarize-tests.sh names the failed fault case with its reasons instead of "crashed or hung".
VF_TEST_NAME=
case $(basename "$0") in fault-*.sh) VF_TEST_NAME=$(basename "$0" .sh) ;; esac
vf_report() { # vf_report pass|fail|skip [LINES...]
    [ -n "$VF_TEST_NAME" ] && [ -n "${top_builddir:-}" ] || return 0
    local verdict=$1 xml=$top_builddir/test-results/$VF_TEST_NAME.xml body
    shift
    mkdir -p "$top_builddir/test-results" || return 0
    echo "VCCL_TEST_XML: $xml"
    body=$(printf '%s\n' "$@" | sed 's/]]>/]] >/g')
    {
        echo '<?xml version="1.0" encoding="UTF-8"?>'
        echo "<testsuites><testsuite name=\"fault\" tests=\"1\">"
        echo "<testcase name=\"$VF_TEST_NAME\" classname=\"fault\" status=\"run\" result=\"completed\">"
        case $verdict in
            fail) echo "<failure message=\"$(printf '%s' "$1" | tr -d '"<>&')\"><![CDATA[$body]]></failure>" ;;
            skip) echo "<skipped message=\"$(printf '%s' "$1" | tr -d '"<>&')\"/>" ;;
        esac
        echo "</testcase></testsuite></testsuites>"
    } >"$xml"
}
# Skips are reported too (netns.sh's vf_skip only prints and exits).
vf_skip() {
    echo "SKIP: $*"
    vf_report skip "$*"
    exit 77
}

# The failover cases test a feature that a library without it cannot pass: such a library declares no
# VCCL_FAILOVER (every variable is in vccl-info -c), and the case skips rather than failing make check.
# VF_FORCE=1 runs it anyway (bounded: it then fails with the stall or error that shows the missing failover).
vf_require_failover() {
    [ "${VF_FORCE:-0}" = 1 ] && return 0
    local info=${VF_VCCL_INFO:-${top_builddir:-.}/vccl-info}
    [ -x "$info" ] || return 0 # cannot tell: run the test
    "$info" -c 2>/dev/null | grep -q '^ *VCCL_FAILOVER ' ||
        vf_skip "this vccl has no failover yet (VCCL_FAILOVER missing from vccl-info -c); VF_FORCE=1 runs it anyway"
}

vf_start() {
    VF_DURATION=$1
    local mode=${2:-mixed}
    [ -x "$VF_WORKER" ] || vf_skip "$VF_WORKER not built (needs MPI; make check builds it)"
    command -v "${MPIRUN%% *}" >/dev/null 2>&1 || vf_skip "mpirun not found"
    vf_setup
    VF_DIR=$(mktemp -d "${TMPDIR:-/tmp}/vccl-fault.XXXXXX") || exit 99
    VF_TIMELINE=$VF_DIR/timeline
    : >"$VF_TIMELINE"
    VF_STOP_FILE=$VF_DIR/worker-exited
    trap 'vf_cleanup_run' EXIT
    trap 'vf_cleanup_run; exit 130' INT
    trap 'vf_cleanup_run; exit 143' TERM
    VF_TX0_RAIL0=$(vf_tx_bytes "$VF_NS0" rail0)
    VF_TX0_RAIL1=$(vf_tx_bytes "$VF_NS0" rail1)
    VF_HARD=${VF_HARD_TIMEOUT:-$((${VF_DURATION%.*} + 30))}
    VF_T_LAUNCH=$(vf_now_ns)
    (
        renice -n 0 -p $BASHPID >/dev/null 2>&1 # normal priority, also when a previous vf_start raised the shell's
        timeout -k 5 "$VF_HARD" $MPIRUN --allow-run-as-root --oversubscribe --bind-to none --mca pml ob1 \
            --mca btl self,vader -np "$VF_NRANKS" "$VF_WORKER" --netns-prefix "${VF_PREFIX}r" --dir "$VF_DIR" \
            --duration "$VF_DURATION" --mode "$mode" --memory "${VF_MEMORY:-host}" >"$VF_DIR/out.log" 2>&1
        echo $? >"$VF_DIR/rc"
        touch "$VF_STOP_FILE"
    ) &
    VF_JOB=$!
    # The ranks poll without pause, and on a 2-core machine running other tests beside them the faults'
    # ip/tc commands waited for a processor for up to seconds, stretching a fault past the mark the checks
    # measure from. Root may raise this shell's priority, which the commands it starts inherit; the job,
    # already started, keeps its own. Elsewhere this fails quietly and nothing changes.
    renice -n -10 -p $$ >/dev/null 2>&1 || true
    # Communicator setup takes a second or two; 60 s means something is broken, not slow.
    local i
    for i in $(seq 600); do
        [ -s "$VF_DIR/started" ] && break
        [ -e "$VF_STOP_FILE" ] && break
        sleep 0.1
    done
    if [ ! -s "$VF_DIR/started" ]; then
        vf_fail "the worker never started (see its output above)"
        return 1
    fi
    VF_STARTED=$(cat "$VF_DIR/started")
    echo "fault test: worker started $(((VF_STARTED - VF_T_LAUNCH) / 1000000)) ms after launch, run ${VF_DURATION} s," \
        "$VF_NRANKS ranks, namespaces ${VF_PREFIX}r0..r$((VF_NRANKS - 1)), folder $VF_DIR"
}

vf_cleanup_run() {
    if [ -n "${VF_JOB:-}" ] && kill -0 "$VF_JOB" 2>/dev/null; then
        # Only our own job: its subshell's children are mpirun and the ranks.
        pkill -TERM -P "$VF_JOB" 2>/dev/null
        sleep 1
        pkill -KILL -P "$VF_JOB" 2>/dev/null
    fi
    vf_cleanup
    if [ -n "${VF_DIR:-}" ] && [ "${VF_KEEP:-0}" != 1 ]; then rm -rf "$VF_DIR"; fi
    return 0
}

vf_at_ms() { # vf_at_ms MS COMMAND...
    local target=$((VF_STARTED / 1000000 + $1)) now
    shift
    now=$(($(vf_now_ns) / 1000000))
    [ "$target" -gt "$now" ] && sleep "$(vf_ms_to_s $((target - now)))"
    if [ -e "$VF_STOP_FILE" ]; then
        echo "fault test: worker already gone, not running: $*"
        return 1
    fi
    echo "fault test: +$(($(vf_now_ns) / 1000000 - VF_STARTED / 1000000)) ms: $*"
    "$@"
}

vf_finish() {
    vf_mark end
    VF_T_SCHEDULE_END=$(vf_now_ns)
    wait "$VF_JOB"
    VF_T_EXIT=$(vf_now_ns)
    VF_RC=$(cat "$VF_DIR/rc" 2>/dev/null || echo 99)
    sed 's/^/  | /' "$VF_DIR/out.log"
    echo "fault test: timeline (ms after started):"
    awk -v s="$VF_STARTED" '{ printf "  %8.1f  %s\n", ($NF - s) / 1e6, $0 }' "$VF_TIMELINE"
    local tx0 tx1
    tx0=$(vf_tx_bytes "$VF_NS0" rail0)
    tx1=$(vf_tx_bytes "$VF_NS0" rail1)
    VF_RAIL0_BYTES=$((${tx0:-0} - ${VF_TX0_RAIL0:-0}))
    VF_RAIL1_BYTES=$((${tx1:-0} - ${VF_TX0_RAIL1:-0}))
    echo "fault test: rank 0 sent $VF_RAIL0_BYTES bytes on rail0, $VF_RAIL1_BYTES on rail1;" \
        "mpirun exit $VF_RC, $(((VF_T_EXIT - VF_T_LAUNCH) / 1000000)) ms after launch"
}

vf_field() { # vf_field RANK KEY: a value from that rank's JSON result (strings without their quotes)
    sed -n "s/.*\"$2\":\(\"[^\"]*\"\|[^,}]*\).*/\1/p" "$VF_DIR/result.r$1.json" 2>/dev/null | tr -d '"'
}

vf_gt() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a + 0 > b + 0) }'; } # float comparison

vf_check() {
    local expect=$1 r any_error=0
    case $VF_RC in
        124 | 137) vf_fail "HANG: the job ran past its hard limit of ${VF_HARD} s and was killed" ;;
    esac
    # The faults only mean something if traffic really went over the rail they hit.
    if [ "${VF_RAIL0_BYTES:-0}" -lt 1000000 ]; then
        vf_fail "rail0 carried only ${VF_RAIL0_BYTES:-0} bytes: vccl's traffic did not use the rails, faults test nothing"
    fi
    for r in $(seq 0 $((VF_NRANKS - 1))); do
        if [ ! -s "$VF_DIR/result.r$r.json" ]; then
            vf_fail "rank $r wrote no result (crashed or killed)"
            continue
        fi
        local setup wrong sums errors code first first_ms stall
        setup=$(vf_field $r setup_error)
        if [ -n "$setup" ]; then
            vf_fail "rank $r setup failed: $setup"
            continue
        fi
        wrong=$(vf_field $r wrong)
        sums=$(vf_field $r checksum_mismatches)
        errors=$(vf_field $r errors)
        code=$(vf_field $r first_error_code)
        first=$(vf_field $r first_error)
        first_ms=$(vf_field $r first_error_ms)
        stall=$(vf_field $r max_stall_ms)
        echo "fault test: rank $r: $(vf_field $r iterations) operations, $wrong wrong elements, $sums bad checksums," \
            "$errors errors, longest stall $stall ms (from +$(vf_field $r max_stall_from_ms) ms), detection $(vf_field $r detect_ms) ms," \
            "failback $(vf_field $r failback_ms) ms, bandwidth healthy/faulted/repaired" \
            "$(vf_field $r bw_healthy_gbs)/$(vf_field $r bw_faulted_gbs)/$(vf_field $r bw_repaired_gbs) GB/s," \
            "paths [$(vf_field $r paths)]"
        if [ "$(vf_field $r faults)" != 0 ] && [ "$(vf_field $r path_switches)" = 0 ]; then
            echo "fault test: rank $r: telemetry never showed traffic leave path 0 (no failover happened)"
        fi
        if [ -n "${VF_MIN_SWITCHES:-}" ] && [ "$(vf_field $r path_switches)" -lt "$VF_MIN_SWITCHES" ] 2>/dev/null; then
            vf_fail "rank $r: telemetry saw $(vf_field $r path_switches) path switches, expected at least $VF_MIN_SWITCHES"
        fi
        [ "${wrong:-1}" = 0 ] || vf_fail "rank $r: $wrong wrong elements"
        [ "${sums:-1}" = 0 ] || vf_fail "rank $r: $sums send/recv payloads with a wrong checksum"
        [ "${errors:-0}" != 0 ] && any_error=1
        if [ "$expect" = ok ]; then
            [ "${errors:-1}" = 0 ] || vf_fail "rank $r: $errors errors, first ${first_ms} ms after the fault: $first"
            if vf_gt "${stall:-0}" "${VF_MAX_STALL_MS:-1500}"; then
                vf_fail "rank $r: operations stalled for $stall ms (limit ${VF_MAX_STALL_MS:-1500})"
            fi
        elif [ "${errors:-0}" != 0 ]; then
            [ "$code" = 6 ] || vf_fail "rank $r: expected vcclRemoteError (6), first error was code $code: $first"
            local limit=$((VCCL_PEER_TIMEOUT_MS + ${VF_DETECT_SLACK_MS:-1500}))
            vf_gt "$first_ms" "$limit" && vf_fail "rank $r: error came ${first_ms} ms after the fault (limit $limit)"
        fi
    done
    if [ "$expect" = remote-error ]; then
        [ $any_error = 1 ] || vf_fail "no rank saw an error although every path was down"
        # After the error everything must wind down promptly: abort, MPI_Finalize, exit.
        local fault_ns exit_ms limit
        fault_ns=$(awk '$1 == "fault" { print $NF; exit }' "$VF_TIMELINE")
        if [ -n "$fault_ns" ]; then
            exit_ms=$(((VF_T_EXIT - fault_ns) / 1000000))
            limit=$((VCCL_PEER_TIMEOUT_MS + ${VF_EXIT_SLACK_MS:-8000}))
            echo "fault test: processes exited $exit_ms ms after both rails went down (limit $limit)"
            [ "$exit_ms" -le "$limit" ] || vf_fail "processes exited $exit_ms ms after the fault (limit $limit)"
        fi
    fi
    if [ ${#vf_fail_reasons[@]} -gt 0 ]; then
        printf 'FAIL: %s\n' "${vf_fail_reasons[@]}"
        # Crashes inside UCX's tcp transport after a forced endpoint close (docs/RELIABILITY.md, "Path failover":
        # two UCX defects, avoided since 2026-11-23 by shutting down the failed path's connections first,
        # src/transport/failover/socket_reset.h): an assertion in one of its tcp_*.c files or in uct_iface.h,
        # or "Caught signal 11" whose faulting frame is not vccl's (libuct, a jump to address 0, or no frame
        # when mpirun killed the job first). Also UCP's assertion on a wireup message purged from a tcp endpoint
        # that failed while connecting (ucp_request.c, seen once in 1,000 alternating rail faults on 2026-11-23,
        # not avoided yet). Such a crash still gets up to three more runs as a safety net
        # (none was needed in 60 runs after the fix); any other failure fails the test at once, and every
        # run's output stays in the log.
        local tries=${VF_RETRIED:-0}
        local missing=0
        for r in $(seq 0 $((VF_NRANKS - 1))); do [ -s "$VF_DIR/result.r$r.json" ] || missing=1; done
        if [ "$tries" -lt 3 ] && [ $missing = 1 ] &&
            { grep -q -E "(tcp_[a-z_]+|arbiter|uct_iface|ucp_[a-z_]+)\.[ch]:[0-9]+ +Assertion" "$VF_DIR/out.log" ||
                { grep -q "Caught signal 11" "$VF_DIR/out.log" &&
                    ! grep -A 7 "Caught signal 11" "$VF_DIR/out.log" | grep -E "^ *4 " | grep -q -E "libvccl|fault_worker"; }; }; then
            echo "fault test: a rank crashed inside UCX (a known UCX tcp defect that vccl should now avoid: please report it; docs/RELIABILITY.md); running the test again (retry $((tries + 1)) of 3)"
            vf_cleanup_run
            trap - EXIT INT TERM
            VF_RETRIED=$((tries + 1)) bash "$0"
            exit $?
        fi
        vf_report fail "${vf_fail_reasons[@]}"
        exit 1
    fi
    echo "PASS"
    vf_report pass
    exit 0
}
