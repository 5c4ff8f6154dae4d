#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Listed in tests/gpu/Makefile.inc: the staged device suites (as np2_shared_gpu_staged.sh) with collectives cut
# into pieces of 2 KiB (VCCL_STAGING_CHUNK_BYTES), so every count of the collective sweeps above two KiB (columns
# of every rank's block for AllGather, ReduceScatter, AlltoAll) runs as many pieces, each a part of the staged
# queue's pipeline, against the same references; the ring
# send/recv of odd sizes likewise travels in pieces. Left out: GpuAsync.ManyReceiveBuffersWhileTheStreamIsBlocked,
# whose 70 calls of 64 pieces each behind a blocked stream fill CUDA's queue for the stream, so a call waits
# for the device (the known bound, docs/RELIABILITY.md; with the default 4 MiB pieces its messages are one piece).
VTEST_GPU_SHARE=1
VCCL_P2P_DIRECT=0
VCCL_STAGING_CHUNK_BYTES=2K
export VTEST_GPU_SHARE VCCL_P2P_DIRECT VCCL_STAGING_CHUNK_BYTES
exec "$(dirname "$0")/run-gpu-test.sh" 2 "${top_builddir:-.}/tests/gpu/test_gpu" \
    --gtest_filter='*GpuReduction*:*GpuMove*:GpuP2p.Ring*:GpuStreamOrder.*:GpuAsync.*-GpuAsync.ManyReceiveBuffersWhileTheStreamIsBlocked' "$@"
