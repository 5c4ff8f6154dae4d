#!/usr/bin/env bash
# (f) Repeated failover: 10 faults alternating between the rails, each taking down the rail in use for 150 ms
# (then 150 ms to reconnect), so every fault is a real switch. Nothing lost, no error, a switch per fault.
. "$(dirname "$0")/fault-common.sh"
vf_require_failover
vf_start 8 || { vf_finish; vf_check ok; }
vf_at_ms 1500 vf_alternate_count 10 150
vf_finish
VF_MIN_SWITCHES=${VF_MIN_SWITCHES:-10} vf_check ok
