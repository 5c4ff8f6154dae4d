#!/bin/sh
# Listed in tests/gpu/Makefile.inc: the staged device suites (as np2_shared_gpu_staged.sh) with collectives cut
# into pieces of 2 KiB (VCCL_STAGING_CHUNK_BYTES), so every count of the reduction and broadcast sweeps above two
# KiB runs as many pieces, each a part of the staged queue's pipeline, against the same references.
VTEST_GPU_SHARE=1
VCCL_P2P_DIRECT=0
VCCL_STAGING_CHUNK_BYTES=2K
export VTEST_GPU_SHARE VCCL_P2P_DIRECT VCCL_STAGING_CHUNK_BYTES
exec "$(dirname "$0")/run-gpu-test.sh" 2 "${top_builddir:-.}/tests/gpu/test_gpu" \
    --gtest_filter='*GpuReduction*:*GpuMove*:GpuStreamOrder.*:GpuAsync.*' "$@"
