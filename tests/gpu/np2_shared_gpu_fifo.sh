#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Listed in tests/gpu/Makefile.inc: the staging FIFO's tests on 2 ranks sharing GPU 0 with the FIFO switched on
# (it is off by default: on 2x H200 it made small send/recv slower, docs/PERFORMANCE.md).
VTEST_GPU_SHARE=1
VCCL_P2P_FIFO_BYTES=${VCCL_P2P_FIFO_BYTES:-32K}
export VTEST_GPU_SHARE VCCL_P2P_FIFO_BYTES
exec "$(dirname "$0")/run-gpu-test.sh" 2 "${top_builddir:-.}/tests/gpu/test_gpu" \
    --gtest_filter='GpuFifo*:GpuFailure.*Fifo*:GpuP2p*:GpuStreamOrder*:GpuTelemetry*' "$@"
