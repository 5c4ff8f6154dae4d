#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The libraries export what their interface names and nothing else (docs/ARCHITECTURE.md): libvccl.so the vccl*
# functions of vccl.h, libvccl_mpi.so vcclCommInitMPI, the NCCL shim nccl* and pnccl*, the interposers MPI_*
# functions. Version nodes (absolute symbols) are not exports. Run from the build directory.
top_builddir=${top_builddir:-.}
status=0
checked=0
check() { # check LIBRARY PATTERN WHAT
    lib=$1 pattern=$2 what=$3
    [ -f "$lib" ] || return 0
    checked=$((checked + 1))
    extra=$(nm -D --defined-only "$lib" | awk '$2 != "A" { sub(/@.*/, "", $3); print $3 }' | grep -Ev "$pattern")
    if [ -n "$extra" ]; then
        echo "FAIL: $lib exports more than $what:"
        echo "$extra" | head -20 | sed 's/^/    /'
        status=1
    else
        echo "ok: $lib exports only $what ($(nm -D --defined-only "$lib" | awk '$2 != "A"' | wc -l) symbols)"
    fi
}
check "$top_builddir/.libs/libvccl.so" '^vccl[A-Z][A-Za-z0-9]*$' "vccl* C functions"
check "$top_builddir/.libs/libvccl_mpi.so" '^vcclCommInitMPI$' "vcclCommInitMPI"
check "$top_builddir/src/nccl_compat/.libs/libnccl.so.2" '^p?nccl[A-Z][A-Za-z0-9]*$' "nccl* and pnccl* functions"
for lib in "$top_builddir"/coll_vccl/pmpi/*/.libs/libvccl-pmpi.so; do
    check "$lib" "^P?MPI_[A-Za-z0-9_]+\$" "MPI_* functions"
done
# A C++ name in any of them would be an internal leaking out.
if [ "$checked" -eq 0 ]; then
    echo "SKIP: no library built under $top_builddir"
    exit 77
fi
exit $status
