#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Listed in tests/gpu/Makefile.inc: vccl-perf -m cuda with each --alloc (cudaMalloc, vcclMemAlloc, VMM made
# as PyTorch's expandable segments make it) on 2 ranks sharing GPU 0: sendrecv and allreduce from 12 bytes to
# 48 MiB (buffers across several 20 MiB VMM allocations), every result verified (-c 1: exit 1 on a wrong
# element), and the header names the allocator. Skipped (77) without a usable GPU.
top=${top_builddir:-.}
perf=$top/vccl-perf
[ -x "$perf" ] || { echo "np2_shared_gpu_perf_alloc.sh: $perf not built" >&2; exit 99; }
if ! out=$("$top/tests/gpu/gpu_probe" 2>&1); then
    echo "SKIP: $out (the device-memory tests need a GPU; run them with make check-gpu on a GPU machine)"
    exit 77
fi
tmp=$(mktemp -d) || exit 99
trap 'rm -rf "$tmp"' EXIT
fail=0
for alloc in cuda vccl vmm; do
    for coll in sendrecv allreduce; do
        timeout 180 mpirun --allow-run-as-root --oversubscribe --bind-to none --mca pml ob1 --mca btl self,vader \
            -np 2 "$perf" -m cuda --alloc $alloc -b 12 -e 48M -f 4 -n 3 -w 1 -c 1 $coll > "$tmp/out.txt" 2>&1
        rc=$?
        if [ $rc -eq 0 ] && grep -q "memory cuda alloc $alloc " "$tmp/out.txt"; then
            echo "ok: --alloc $alloc $coll: every size verified"
        else
            echo "FAIL: --alloc $alloc $coll: exit $rc (or the header does not name the allocator):"
            cat "$tmp/out.txt"
            fail=1
        fi
    done
done
exit $fail
