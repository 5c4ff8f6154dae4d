#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# (f, spray) VCCL_MULTIPATH=spray, repeated faults: 10 faults alternating between the rails, each taking one
# down for 150 ms (then 150 ms to reconnect). With spray both rails carry chunks, so every fault hits traffic
# in flight: the active rail's loss is a switch, the other's a move of its chunks onto the active one. Nothing
# lost, no error, stalls within the limit.
. "$(dirname "$0")/fault-common.sh"
export VCCL_MULTIPATH=spray
vf_require_failover
vf_start 8 large || { vf_finish; vf_check ok; }
vf_at_ms 1500 vf_alternate_count 10 150
vf_finish
vf_check ok
