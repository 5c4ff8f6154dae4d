#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# (a) with the rings in /dev/shm: rail0 down for 3 s, then up, as fault-link-down-up.sh; vccl-telemetry serve
# --print, taken before the fault, while rail0 is down and after it is back, shows no failover before, the
# failover counted on the primary path with its cause (link_down on the rank that saw its port go down) and
# traffic on the backup while down, and the failback afterwards; every ring names its rails (rail0 primary,
# rail1 backup). The job's rings are removed at the end.
. "$(dirname "$0")/fault-common.sh"
vf_require_failover
tool=${top_builddir:-.}/vccl-telemetry
[ -x "$tool" ] || vf_skip "$tool not built"
export VCCL_TELEMETRY_SHM=1
export VCCL_TELEMETRY_JOB=faultmetrics$$
snap() { "$tool" serve --print --job "$VCCL_TELEMETRY_JOB" > "$VF_DIR/metrics.$1" 2>&1; }
# sum FILE REGEX: the sum of the samples whose line matches REGEX
sum() { awk -v re="$2" '$0 !~ /^#/ && $0 ~ re { s += $NF } END { print s + 0 }' "$VF_DIR/metrics.$1"; }
vf_start 8 || { vf_finish; vf_check ok; }
vf_at_ms 1500 snap before
vf_at_ms 2000 vf_link_down rail0
vf_at_ms 4000 snap down
vf_at_ms 5000 vf_link_up rail0
vf_at_ms 7500 snap after
vf_finish
job_sel="vccl_job=\"$VCCL_TELEMETRY_JOB\""
if [ -s "$VF_DIR/metrics.before" ] && [ -s "$VF_DIR/metrics.down" ] && [ -s "$VF_DIR/metrics.after" ]; then
    rings=$(sum before '^vccl_scrape_rings ')
    before=$(sum before '^vccl_path_failovers_total')
    link_down=$(sum down "^vccl_path_failovers_total.*path=\"primary\",cause=\"link_down\"")
    all_down=$(sum down '^vccl_path_failovers_total')
    backup_bytes=$(sum down '^vccl_path_bytes_total.*path="backup",dir="send"')
    failbacks=$(sum after '^vccl_path_failbacks_total.*path="primary"')
    echo "fault test: metrics: $rings rings; failovers before $before, while down $all_down ($link_down link_down on" \
        "primary paths), $backup_bytes bytes sent on backups; failbacks after $failbacks"
    grep '^vccl_path_failovers_total' "$VF_DIR/metrics.down" | sed 's/^/  | /'
    [ "$rings" = "$VF_NRANKS" ] || vf_fail "serve saw $rings rings of job $VCCL_TELEMETRY_JOB, want $VF_NRANKS"
    [ "$before" = 0 ] || vf_fail "failovers counted before the fault: $before"
    [ "$link_down" -ge 1 ] 2>/dev/null || vf_fail "no failover with cause link_down on a primary path while rail0 was down"
    [ "$all_down" -ge "$VF_NRANKS" ] 2>/dev/null || vf_fail "$all_down failovers counted over $VF_NRANKS ranks while down"
    [ "$backup_bytes" -gt 0 ] 2>/dev/null || vf_fail "no bytes counted on the backup paths while rail0 was down"
    [ "$failbacks" -ge 1 ] 2>/dev/null || vf_fail "no failback counted after rail0 came back"
    grep -q "$job_sel" "$VF_DIR/metrics.down" || vf_fail "no series of job $VCCL_TELEMETRY_JOB"
    # Each ring names its rails: the primary on rail0, the backup on rail1, as the job set them.
    rails_primary=$(grep -c '^vccl_path_info{.*path="primary",role="primary",rail="rail0"} 1$' "$VF_DIR/metrics.before")
    rails_backup=$(grep -c '^vccl_path_info{.*path="backup",role="backup",rail="rail1"} 1$' "$VF_DIR/metrics.before")
    [ "$rails_primary" = "$VF_NRANKS" ] && [ "$rails_backup" = "$VF_NRANKS" ] ||
        vf_fail "vccl_path_info: $rails_primary primaries on rail0 and $rails_backup backups on rail1, want $VF_NRANKS each"
else
    vf_fail "a metrics snapshot is missing or empty"
fi
rm -f /dev/shm/vccl-"$VCCL_TELEMETRY_JOB"-*
vf_check ok
