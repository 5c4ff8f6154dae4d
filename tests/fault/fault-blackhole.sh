#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# (b) Silent loss: rail0 stays up but drops every packet for 3 s (found only by the ack timeout).
. "$(dirname "$0")/fault-common.sh"
vf_require_failover
vf_start 8 || { vf_finish; vf_check ok; }
vf_at_ms 2000 vf_blackhole rail0
vf_at_ms 5000 vf_unblackhole rail0
vf_finish
vf_check ok
