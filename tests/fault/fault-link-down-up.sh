#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# (a) Port down on rail0 for 3 s, then up: traffic must move to rail1 and back, nothing lost, no error.
. "$(dirname "$0")/fault-common.sh"
vf_require_failover
vf_start 8 || { vf_finish; vf_check ok; }
vf_at_ms 2000 vf_link_down rail0
vf_at_ms 5000 vf_link_up rail0
vf_finish
vf_check ok
