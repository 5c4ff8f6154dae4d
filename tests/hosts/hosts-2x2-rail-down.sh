#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# A rail failing under the two-level collectives: 2 emulated hosts x 2 ranks, each local rank with the other
# rail as its backup (local rank 0 rail1, local rank 1 rail0). hosts_worker runs every collective, checked, and
# a 16 MiB AllReduce per round for 12 s; rail0 of host 0 goes down 3 s in and comes back 3 s later. Passes when
# every rank reported, nothing was wrong and no call failed, host 0's rail1 carried traffic while rail0 was down
# (the failover) and rail0 carried traffic again after it came back (the failback). Exit 0 pass, 1 fail, 77 skip.
. "$(dirname "$0")/hosts-common.sh"
vh_setup "2 2"
export VH_BACKUP_NET_DEVICES=rail1,rail0
VH_HARD_TIMEOUT=${VH_HARD_TIMEOUT:-150}
seconds=${RAIL_DOWN_SECONDS:-12}
vh_run --seconds "$seconds" &
job=$!
sleep 3
r0_before=$(vh_rail_tx 0 0)
r1_before=$(vh_rail_tx 0 1)
ip -n "${VH_PREFIX}0" link set rail0 down
sleep 3
r1_down=$(vh_rail_tx 0 1)
r0_down=$(vh_rail_tx 0 0)
ip -n "${VH_PREFIX}0" link set rail0 up
vh_wait_up "${VH_PREFIX}0" rail0 || echo "hosts test: rail0 of host 0 shows no carrier after link up"
wait "$job"
rc=$?
r0_end=$(vh_rail_tx 0 0)
sed 's/^/  | /' "$VH_OUT"
fail=0
[ "$rc" -eq 0 ] || { echo "FAIL: mpirun exit $rc (124/137: hung past the limit)"; fail=1; }
vh_judge_ranks 300 "one round is about 330" || fail=1
backup_bytes=$((${r1_down:-0} - ${r1_before:-0}))
down_bytes=$((${r0_down:-0} - ${r0_before:-0}))
after_bytes=$((${r0_end:-0} - ${r0_down:-0}))
echo "hosts test: host 0 while rail0 was down: rail1 sent $backup_bytes B, rail0 $down_bytes B; rail0 after it came back: $after_bytes B"
[ "$backup_bytes" -gt 1000000 ] || { echo "FAIL: rail1 of host 0 carried $backup_bytes bytes while rail0 was down: no failover"; fail=1; }
[ "$after_bytes" -gt 1000000 ] || { echo "FAIL: rail0 of host 0 carried $after_bytes bytes after it came back: no failback"; fail=1; }
[ "$fail" -eq 0 ] && echo PASS
exit "$fail"
