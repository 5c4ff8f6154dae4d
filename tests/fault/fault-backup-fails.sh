#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# (g) The backup fails while it carries the traffic. With VCCL_FAILBACK=0 traffic stays on rail1 after rail0
# is repaired; then rail1 drops every packet for 3 s (link up: only the ack timeout finds it). One rank finds
# the silence and moves to rail0, the other follows on its RESUME. Both must close rail1: UCX receives matched
# there before the switch, their data partly in, cannot be cancelled and end only when that path breaks, and a
# blackholed path does not break by itself; without the close the pair stalled until rail1 was repaired.
. "$(dirname "$0")/fault-common.sh"
vf_require_failover
export VCCL_FAILBACK=0
vf_start 9 || { vf_finish; vf_check ok; }
vf_at_ms 1500 vf_link_down rail0
vf_at_ms 1800 vf_link_up rail0
vf_at_ms 4500 vf_blackhole rail1
vf_at_ms 7500 vf_unblackhole rail1
vf_finish
# VCCL_FAILBACK=0: no rank moved back to rail0 of its own accord while rail1 worked, and the blackhole moved
# traffic back to rail0 (the second switch), found by the silence.
if grep -q "for path 0 (rail0): failback" "$VF_DIR/out.log"; then
    vf_fail "a rank failed back to rail0 although VCCL_FAILBACK=0"
fi
grep -q "leaving path 1 (rail1) for path 0 (rail0): \(no acknowledgement\|no data arriving\|acknowledgements lost\)" \
    "$VF_DIR/out.log" || vf_fail "no rank left rail1 for rail0 on the silence (traffic was not on rail1 at the blackhole?)"
VF_MIN_SWITCHES=2 vf_check ok
