#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Listed in tests/gpu/Makefile.inc: test_gpu on 2 ranks sharing GPU 0.
VTEST_GPU_SHARE=1
export VTEST_GPU_SHARE
# GpuFailure.DestroyReleasesSenderAfterOpTimeout waits this long for a peer that never comes.
VCCL_OP_TIMEOUT_MS=${VCCL_OP_TIMEOUT_MS:-8000}
export VCCL_OP_TIMEOUT_MS
exec "$(dirname "$0")/run-gpu-test.sh" 2 "${top_builddir:-.}/tests/gpu/test_gpu" "$@"
