#!/usr/bin/env bash
# (d) rail0 flapping: down and up every 200 ms for 10 s, then stable. Nothing lost, no error.
. "$(dirname "$0")/fault-common.sh"
vf_require_failover
vf_start 14 || { vf_finish; vf_check ok; }
vf_at_ms 1500 vf_flap 10 200 rail0
vf_finish
vf_check ok
