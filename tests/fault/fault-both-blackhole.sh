#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Both rails silently dead for good (links up, every packet dropped): no link event, no endpoint error, the
# probe of the other path is never answered. Operations must end with vcclRemoteError within
# VCCL_PEER_TIMEOUT_MS of the silence, not at VCCL_OP_TIMEOUT_MS (10 minutes), and the processes must exit.
export VCCL_PEER_TIMEOUT_MS=${VCCL_PEER_TIMEOUT_MS:-2000}
. "$(dirname "$0")/fault-common.sh"
vf_require_failover
vf_start 14 || { vf_finish; vf_check remote-error; }
vf_at_ms 2000 vf_both_blackhole
vf_finish
vf_check remote-error
