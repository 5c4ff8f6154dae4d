#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Listed in tests/gpu/Makefile.inc: the direct path on 2 ranks sharing GPU 0 with room for more receive buffers
# per peer than the default (VCCL_P2P_MAX_MAPPINGS): many receive buffers behind a blocked stream, where no
# mapping is let go (np2_shared_gpu.sh runs the same test with the default, where they are).
VTEST_GPU_SHARE=1
VCCL_P2P_MAX_MAPPINGS=${VCCL_P2P_MAX_MAPPINGS:-128}
export VTEST_GPU_SHARE VCCL_P2P_MAX_MAPPINGS
exec "$(dirname "$0")/run-gpu-test.sh" 2 "${top_builddir:-.}/tests/gpu/test_gpu" \
    --gtest_filter='GpuAsync.ManyReceiveBuffers*:GpuAsync.CallsReturn*:GpuP2p*' "$@"
