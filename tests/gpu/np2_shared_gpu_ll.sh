#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Listed in tests/gpu/Makefile.inc: the reduction, PreMulSum and data movement (AllGather, Broadcast, AlltoAll)
# tests and the low-latency kernels' failure tests on 2 ranks sharing GPU 0 with VCCL_ALLREDUCE_LL_BYTES set (the
# low-latency collectives are off where ranks share a GPU unless it is set: gpu_test_util.h turns the test hook on
# then).
# VTEST_GPU_SHARE=0: one GPU per rank; VTEST_NP: ranks (2).
# The kernels spin while the processes take turns on the shared GPU, so this is slow: on 3 ranks sharing one H200
# at 16K GpuPreMulSum.EveryTypeCollectiveAndResidence took 129 s, over the watchdog's default of 120 s per test;
# hence 600 here.
VTEST_GPU_SHARE=${VTEST_GPU_SHARE:-1}
VCCL_ALLREDUCE_LL_BYTES=${VCCL_ALLREDUCE_LL_BYTES:-16K}
VCCL_TEST_TIMEOUT_S=${VCCL_TEST_TIMEOUT_S:-600}
export VTEST_GPU_SHARE VCCL_ALLREDUCE_LL_BYTES VCCL_TEST_TIMEOUT_S
exec "$(dirname "$0")/run-gpu-test.sh" "${VTEST_NP:-2}" "${top_builddir:-.}/tests/gpu/test_gpu" \
    --gtest_filter='*GpuReduction*:*GpuReductionBits*:GpuLl*:GpuChunked*:GpuStreamOrder.AllReduce*:*GpuMove*:GpuPreMulSum*:GpuGraph*' "$@"
