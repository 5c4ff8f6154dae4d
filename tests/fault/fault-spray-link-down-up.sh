#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# (a, spray) VCCL_MULTIPATH=spray: chunks of large messages go over both rails. Port down on rail0 (the active
# path) for 2 s, then up; later rail1 (the other path of the spray set) down for 2 s, then up. Each loss moves the
# lost rail's chunks to the other one, nothing lost, no error; each rail rejoins the spray set when it is back.
# Both rails must have carried data (the spray).
. "$(dirname "$0")/fault-common.sh"
export VCCL_MULTIPATH=spray
vf_require_failover
vf_start 9 || { vf_finish; vf_check ok; }
vf_at_ms 1500 vf_link_down rail0
vf_at_ms 3500 vf_link_up rail0
vf_at_ms 5500 vf_link_down rail1
vf_at_ms 7500 vf_link_up rail1
vf_finish
if [ "${VF_RAIL1_BYTES:-0}" -lt 1000000 ]; then
    vf_fail "rail1 carried only ${VF_RAIL1_BYTES:-0} bytes: the chunks were not sprayed"
fi
vf_check ok
