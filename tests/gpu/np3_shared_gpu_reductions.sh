#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Listed in tests/gpu/Makefile.inc: the device collectives on 3 ranks sharing GPU 0. With 2 ranks a + b == b + a,
# so only 3 or more can show a reduction order that differs between ranks (GpuReductionBits); 3 ranks also
# give blocks of unequal sizes, and PreMulSum a middle rank whose own block splits the scaled copy in two.
VTEST_GPU_SHARE=1
export VTEST_GPU_SHARE
exec "$(dirname "$0")/run-gpu-test.sh" 3 "${top_builddir:-.}/tests/gpu/test_gpu" \
    --gtest_filter='*GpuReduction*:*GpuMove*:GpuPreMulSum*' "$@"
