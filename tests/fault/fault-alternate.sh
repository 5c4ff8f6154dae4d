#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# (f) Repeated failover: 10 faults alternating between the rails, each taking down the rail in use for 150 ms
# (then 150 ms to reconnect). Nothing lost, no error, stalls within the limit. Most faults are a real switch;
# not all: a rail that keeps dropping is reconnected only when the other one fails (the hold against
# flapping, VCCL_FAILBACK_INTERVAL_MS/2 doubling per drop), and a fault can end before that reconnect
# finishes, so at least 6 switches are required (8-10 seen on the 2-core VM).
. "$(dirname "$0")/fault-common.sh"
vf_require_failover
vf_start 8 || { vf_finish; vf_check ok; }
vf_at_ms 1500 vf_alternate_count 10 150
vf_finish
VF_MIN_SWITCHES=${VF_MIN_SWITCHES:-6} vf_check ok
