#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# run-coll.sh NP MODE [extra mpirun args]: runs test_coll on NP ranks with the coll/vccl component loaded.
#   MODE vccl      coll_vccl_host=1: host buffers go through vccl; the log must show a vccl communicator
#                  created on first use on every rank, calls through vccl, and teardown in MPI_Finalize
#   MODE disabled  coll_vccl_enable=0: Open MPI's own components (the previous modules) on the same checks;
#                  the log must not show vccl at all
#   MODE off       enabled, but coll_vccl_priority=-1: likewise (a priority of 0 or less turns it off, also on
#                  single-process communicators, where it otherwise ranks itself above coll/self)
# Environment (set by make check): top_builddir, MPIRUN; EXPECT_FREED (see below). GoogleTest XML goes to $top_builddir/test-results/.
set -u
np=$1
mode=$2
shift 2
: "${top_builddir:=$(cd "$(dirname "$0")/../.." && pwd)}"
: "${MPIRUN:=mpirun}"
[ -n "$MPIRUN" ] || MPIRUN=mpirun
ompi_dir=${VCCL_OMPI_COMPONENT_DIR:-/usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi3}
exe=$top_builddir/tests/coll/test_coll
comp=$top_builddir/coll_vccl/.libs
[ -x "$exe" ] || { echo "missing $exe"; exit 99; }
[ -f "$comp/mca_coll_vccl.so" ] || { echo "missing $comp/mca_coll_vccl.so"; exit 99; }
case $mode in
vccl) params="--mca coll_vccl_enable 1 --mca coll_vccl_host 1" ;;
disabled) params="--mca coll_vccl_enable 0" ;;
off) params="--mca coll_vccl_enable 1 --mca coll_vccl_host 1 --mca coll_vccl_priority -1" ;;
*) echo "unknown mode $mode"; exit 99 ;;
esac
mkdir -p "$top_builddir/test-results"
name=test_coll-np$np-$mode
log=$top_builddir/tests/coll/$name.log.stderr
# shellcheck disable=SC2086
GTEST_OUTPUT=xml:$top_builddir/test-results/$name.xml timeout 300 "$MPIRUN" --allow-run-as-root --oversubscribe \
    --bind-to none --mca pml ob1 --mca btl self,vader -np "$np" \
    --mca mca_base_component_path "$comp:$ompi_dir" --mca coll_vccl_verbose 1 $params \
    -x GTEST_OUTPUT "$@" "$exe" 2>"$log"
rc=$?
grep -v '^coll:vccl:' "$log" >&2
echo "mpirun exit status: $rc"
[ $rc -eq 0 ] || exit 1

created=$(grep -c 'created vccl communicator for cid 0 ' "$log")
finalized=$(grep -c 'destroying vccl communicator of cid 0 (MPI_Finalize)' "$log")
freed=$(grep -c '(communicator freed)' "$log")
echo "vccl communicators on MPI_COMM_WORLD created: $created, destroyed in MPI_Finalize: $finalized; freed with their communicator: $freed"
if [ "$mode" = vccl ]; then
    [ "$created" -eq "$np" ] || { echo "FAIL: coll/vccl was not used on every rank"; exit 1; }
    [ "$finalized" -eq "$np" ] || { echo "FAIL: vccl communicators not destroyed in MPI_Finalize"; exit 1; }
    # the dup/split loop: 20 dups (and halves of 2 ranks or more) per rank; EXPECT_FREED=0 when
    # coll_vccl_min_bytes keeps the loop's small messages off vccl
    [ "$freed" -ge "${EXPECT_FREED:-$((20 * np))}" ] || { echo "FAIL: communicators of the dup/split loop not torn down"; exit 1; }
    grep 'destroying vccl communicator of cid 0 ' "$log" | sed 's/.*: //' | sort | uniq -c
    if grep ' 0 calls through vccl' "$log" | grep -q 'cid 0 '; then
        echo "FAIL: MPI_COMM_WORLD made no call through vccl"; exit 1
    fi
else
    if grep -q 'created vccl communicator' "$log"; then echo "FAIL: coll/vccl was used in mode $mode"; exit 1; fi
fi
exit 0
