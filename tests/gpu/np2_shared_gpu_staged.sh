#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Listed in tests/gpu/Makefile.inc: the device-memory suites on 2 ranks sharing GPU 0 with the direct path off
# (VCCL_P2P_DIRECT=0), so every device buffer goes through the asynchronous host staging (as between nodes).
VTEST_GPU_SHARE=1
VCCL_P2P_DIRECT=0
export VTEST_GPU_SHARE VCCL_P2P_DIRECT
exec "$(dirname "$0")/run-gpu-test.sh" 2 "${top_builddir:-.}/tests/gpu/test_gpu" \
    --gtest_filter='*GpuReduction*:*GpuMove*:GpuP2p.Ring*:GpuStreamOrder.*:GpuAsync.*:GpuGraph.*:GpuPreMulSum*' "$@"
