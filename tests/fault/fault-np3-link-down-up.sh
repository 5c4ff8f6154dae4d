#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# (a) with 3 ranks on switched rails: rank 0's rail0 port down for 3 s, then up. Ranks 1 and 2 keep seeing
# their own rail0 up: their paths to rank 0 must follow rank 0 to rail1 (the peer's switch, or the ack
# timeout) while 1 <-> 2 may stay on rail0. Nothing lost, no error.
. "$(dirname "$0")/fault-common.sh"
vf_require_failover
export VF_NRANKS=3
# Three busy-polling ranks on the 2-core CI machine: a rank can wait a scheduling round for the others.
: "${VF_MAX_STALL_MS:=3000}"
export VF_MAX_STALL_MS
vf_start 8 || { vf_finish; vf_check ok; }
vf_at_ms 2000 vf_link_down rail0
vf_at_ms 5000 vf_link_up rail0
vf_finish
vf_check ok
