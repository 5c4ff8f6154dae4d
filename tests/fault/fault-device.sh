#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# (a) on device memory: rail0 down for 3 s, then up, while both ranks run allreduce and send/recv on cudaMalloc
# buffers (GPU 0) with VCCL_P2P_DIRECT=0, so the data crosses the rails through vccl's host staging as between
# two nodes. Nothing lost, no error. Skips (77) without a GPU or a CUDA build.
. "$(dirname "$0")/fault-common.sh"
vf_require_failover
[ -x "$VF_WORKER" ] || vf_skip "$VF_WORKER not built (needs MPI; make check builds it)"
why=$("$VF_WORKER" --probe-cuda 2>&1) || vf_skip "device memory: $why"
export VF_MEMORY=cuda VCCL_P2P_DIRECT=0
vf_start 8 || { vf_finish; vf_check ok; }
vf_at_ms 2000 vf_link_down rail0
vf_at_ms 5000 vf_link_up rail0
vf_finish
vf_check ok
