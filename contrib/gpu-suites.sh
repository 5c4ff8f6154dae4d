#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Every device-memory suite of tests/gpu on a GPU machine, then the device collectives once per device algorithm
# forced with VCCL_ALGO, one line per run ("ok"/"FAIL", seconds, the gtest summary). Needs a CUDA build whose test
# programs are built (make check TESTS=). Exit status 0 only when every run passed.
#
#   contrib/gpu-suites.sh BUILD_DIR [suites|algorithms|all]    (default: all)
#
# With one GPU the suites that need two (np2_gpu.sh) are skipped by their own probe, and the forced-algorithm runs
# use 2 ranks sharing GPU 0 with the low-latency kernels on (VCCL_ALLREDUCE_LL_BYTES=16K, as np2_shared_gpu_ll.sh).
set -uo pipefail
build=${1:?usage: $0 BUILD_DIR [suites|algorithms|all]}
what=${2:-all}
build=$(cd "$build" && pwd)
src=$(cd "$(dirname "$0")/.." && pwd)
export top_builddir=$build top_srcdir=$src NCCL_NVLS_ENABLE=0
failed=0
run() { # run NAME COMMAND...: one line of outcome; the log is kept under $build/gpu-suites/
    local name=$1 start rc log
    shift
    mkdir -p "$build/gpu-suites"
    log="$build/gpu-suites/$name.log"
    start=$(date +%s)
    "$@" >"$log" 2>&1
    rc=$?
    local summary
    summary=$(grep -E '^\[  (PASSED|FAILED)  \]|tests? ran|SKIP:|jobs, [0-9]+ failed' "$log" | tr '\n' ' ' | cut -c1-200)
    case $rc in
        0) echo "ok    $name $(($(date +%s) - start)) s  $summary" ;;
        77) echo "skip  $name  $(grep -m1 SKIP "$log")" ;;
        *) echo "FAIL  $name (exit $rc) $(($(date +%s) - start)) s  $summary"; failed=$((failed + 1))
           grep -E '^\[  FAILED  \]|Failure|error' "$log" | head -10 | sed 's/^/      /' ;;
    esac
}
if [ "$what" = suites ] || [ "$what" = all ]; then
    for s in np2_gpu np2_shared_gpu np2_shared_gpu_fifo np2_shared_gpu_ll np2_shared_gpu_staged \
             np2_shared_gpu_staged_pieces np2_shared_gpu_perf_alloc np2_shared_gpu_mappings np2_shared_gpu_exit \
             np3_shared_gpu_reductions; do
        run "$s" "$src/tests/gpu/$s.sh"
    done
fi
if [ "$what" = algorithms ] || [ "$what" = all ]; then
    # Every device algorithm forced, in five runs (each names one algorithm per collective). Where a forced
    # algorithm cannot take a call (sizes beyond its word sets), the default runs it.
    filter='*GpuReduction*:*GpuReductionBits*:*GpuMove*:GpuPreMulSum*:GpuStreamOrder.AllReduce*'
    for algos in "allreduce:ll,reducescatter:ll,allgather:ll,broadcast:ll,reduce:ll,alltoall:ll" \
                 "allreduce:chunked,reducescatter:chunked,allgather:ce,broadcast:ce,reduce:ce,alltoall:ce" \
                 "allreduce:one_shot,reducescatter:blocks" \
                 "allreduce:rsag,reducescatter:pieces" \
                 "allreduce:pieces"; do
        run "algo-${algos//[:,]/_}" env VCCL_ALGO="$algos" VTEST_GPU_SHARE=1 VCCL_ALLREDUCE_LL_BYTES=16K \
            VCCL_TEST_TIMEOUT_S=600 "$src/tests/gpu/run-gpu-test.sh" 2 "$build/tests/gpu/test_gpu" \
            --gtest_filter="$filter"
    done
fi
echo "gpu-suites: $failed failed"
[ "$failed" -eq 0 ]
