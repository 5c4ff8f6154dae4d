#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Listed in tests/mpi/Makefile.inc: vccl-perf --alloc and --stream-priority refuse what they cannot do, with
# exit status 2 and a message that says what to change: an unknown allocator or priority, either without -m
# cuda, a priority in soak mode. The allocators themselves need a GPU (tests/gpu/np2_shared_gpu_perf_alloc.sh).
perf=${top_builddir:-.}/vccl-perf
[ -x "$perf" ] || { echo "perf_alloc_usage.sh: $perf not built" >&2; exit 99; }
fail=0
check() { # check WANT_TEXT ARGS...: exit status 2 and WANT_TEXT in the output
    want=$1
    shift
    out=$(timeout 60 "$perf" "$@" 2>&1)
    rc=$?
    if [ $rc -eq 2 ] && printf '%s\n' "$out" | grep -qF -- "$want"; then
        echo "ok: vccl-perf $*: exit 2, says \"$want\""
    else
        echo "FAIL: vccl-perf $*: exit $rc, want 2 and \"$want\"; output:"
        printf '%s\n' "$out"
        fail=1
    fi
}
check "invalid device allocator (--alloc cuda|vccl|vmm) 'bogus'" --alloc bogus sendrecv
check "--alloc chooses how device buffers are allocated: add -m cuda" --alloc vmm -b 8 -e 8 sendrecv
check "--alloc chooses how device buffers are allocated: add -m cuda" -m host --alloc vccl -b 8 -e 8 sendrecv
check "invalid stream priority (--stream-priority high|default) 'urgent'" --stream-priority urgent sendrecv
check "--stream-priority sets the priority of the stream device buffers use: add -m cuda" --stream-priority high -b 8 -e 8 sendrecv
check "--soak: runs on host memory only: --stream-priority does not apply" --soak 1 --stream-priority high
for opt in "--alloc cuda|vccl|vmm" "--stream-priority high|default"; do
    if "$perf" --help | grep -q -- "$opt"; then
        echo "ok: --help lists $opt"
    else
        echo "FAIL: --help does not list $opt"
        fail=1
    fi
done
exit $fail
