#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Listed in tests/nccl_compat/Makefile.inc: vccl-perf --baseline nccl refuses vccl's own NCCL shim (same
# SONAME libnccl.so.2), whether named with --nccl-lib or found first in LD_LIBRARY_PATH: taken as the baseline,
# it made vccl's figures and "NCCL's" identical (2x H100, 2026-11-27). Exit status 2 and a message that names
# the file, before any GPU is looked for, so this runs on machines without one.
top=${top_builddir:-.}
perf=$top/vccl-perf
shim=$top/src/nccl_compat/.libs/libnccl.so.2
[ -x "$perf" ] || { echo "perf_refuses_shim.sh: $perf not built" >&2; exit 99; }
[ -e "$shim" ] || { echo "perf_refuses_shim.sh: $shim not built" >&2; exit 99; }
fail=0
check() { # check DESCRIPTION [ENV=VALUE] -- ARGS...
    what=$1
    shift
    out=$(env "$@" 2>&1)
    rc=$?
    if [ $rc -eq 2 ] && printf '%s\n' "$out" | grep -q "which is vccl's NCCL shim (libvccl-nccl), not NCCL"; then
        echo "ok: $what: exit 2, the shim refused"
    else
        echo "FAIL: $what: exit $rc, want 2 and the shim refused; output:"
        printf '%s\n' "$out"
        fail=1
    fi
}
check "--nccl-lib naming the shim" timeout 60 "$perf" -m cuda --baseline nccl --nccl-lib "$shim" -b 8 -e 8 allreduce
check "the shim first in LD_LIBRARY_PATH" LD_LIBRARY_PATH="$top/src/nccl_compat/.libs:${LD_LIBRARY_PATH:-}" \
    timeout 60 "$perf" -m cuda --baseline nccl -b 8 -e 8 sendrecv
exit $fail
