#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# (e) Both rails down for good: operations must end with vcclRemoteError within VCCL_PEER_TIMEOUT_MS, no hang,
# and the processes must exit promptly.
# Set before fault-common.sh gives it its default of 10 s: a short limit keeps the test short.
export VCCL_PEER_TIMEOUT_MS=${VCCL_PEER_TIMEOUT_MS:-2000}
. "$(dirname "$0")/fault-common.sh"
vf_require_failover
vf_start 12 || { vf_finish; vf_check remote-error; }
vf_at_ms 2000 vf_both_down
vf_finish
vf_check remote-error
