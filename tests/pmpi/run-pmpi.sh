#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# run-pmpi.sh FLAVOUR NP MODE [program args]: runs test_pmpi of FLAVOUR (openmpi or mpich) on NP ranks with
# that flavour's libvccl-pmpi.so in LD_PRELOAD (of the ranks only, not of the launcher).
#   MODE host    VCCL_PMPI_HOST=1: host buffers go through vccl where vccl can take them
#        asdev   VCCL_PMPI_HOST=2: host buffers are taken for device memory (the staging paths)
#        off     VCCL_PMPI=0: the interposer is loaded but passes everything on
#        errors  the Errors.* cases only, with a 1.5 s VCCL_OP_TIMEOUT_MS
#        device  test_pmpi_gpu on cudaMalloc buffers, VCCL_PMPI_HOST=0; exit 77 (skipped) without a GPU
# With VCCL_PMPI_VERBOSE=1 the interposer logs each vccl communicator it creates and destroys; the log must
# show one on every rank (none with MODE off), teardown in MPI_Finalize of those left alive, and those of the
# dup/split loops freed with their communicators.
# Environment (set by make check): top_builddir; PMPI_OMPI_MPIRUN, PMPI_MPICH_MPIEXEC (the launchers).
# GoogleTest XML: $top_builddir/test-results/test_pmpi-FLAVOUR-npNP-MODE.xml.
set -u
[ $# -ge 3 ] || { echo "usage: $0 openmpi|mpich NP host|asdev|off|errors|device [args]" >&2; exit 99; }
flavour=$1
np=$2
mode=$3
shift 3
: "${top_builddir:=$(cd "$(dirname "$0")/../.." && pwd)}"
lib=$top_builddir/coll_vccl/pmpi/$flavour/.libs/libvccl-pmpi.so
exe=$top_builddir/tests/pmpi/$flavour/test_pmpi
[ "$mode" = device ] && exe=${exe}_gpu
[ -f "$lib" ] || { echo "missing $lib (configure found no $flavour?)"; exit 99; }
[ -x "$exe" ] || { echo "missing $exe"; exit 99; }

if [ "$mode" = device ]; then
    probe=$top_builddir/tests/gpu/gpu_probe
    if [ ! -x "$probe" ]; then
        echo "SKIP: $probe not built (it needs CUDA, MPI and GoogleTest)"
        exit 77
    fi
    if ! out=$("$probe" 2>&1); then
        echo "SKIP: $out (the device-memory run of test_pmpi needs a GPU; run make check-pmpi-gpu on a GPU machine)"
        exit 77
    fi
    echo "$out"
fi

filter=""
VCCL_PMPI=1
VCCL_PMPI_HOST=1
VCCL_PMPI_VERBOSE=1
VTEST_PMPI_MODE=$mode
extra_env=""
case $mode in
host) ;;
asdev) VCCL_PMPI_HOST=2 ;;
off) VCCL_PMPI=0 ;;
errors) VTEST_PMPI_MODE=host; filter=--gtest_filter='Errors.*'; extra_env="VTEST_PMPI_ERRORS=1 VCCL_OP_TIMEOUT_MS=1500" ;;
device) VCCL_PMPI_HOST=0 ;;
*) echo "unknown mode $mode"; exit 99 ;;
esac

mkdir -p "$top_builddir/test-results" "$top_builddir/tests/pmpi"
name=test_pmpi-$flavour-np$np-$mode
xml=$top_builddir/test-results/$name.xml
log=$top_builddir/tests/pmpi/$name.log.stderr
rm -f "$xml"
echo "VCCL_TEST_XML: $xml"
vars="VCCL_PMPI=$VCCL_PMPI VCCL_PMPI_HOST=$VCCL_PMPI_HOST VCCL_PMPI_VERBOSE=$VCCL_PMPI_VERBOSE VTEST_PMPI_MODE=$VTEST_PMPI_MODE GTEST_OUTPUT=xml:$xml GTEST_COLOR=no $extra_env"
echo "$flavour np $np: $vars LD_PRELOAD=$lib"
start=$(date +%s)
case $flavour in
openmpi)
    : "${PMPI_OMPI_MPIRUN:=mpirun}"
    xs=""
    for v in $vars; do xs="$xs -x $v"; done
    # shellcheck disable=SC2086
    timeout -k 10 300 "$PMPI_OMPI_MPIRUN" --allow-run-as-root --oversubscribe --bind-to none --mca pml ob1 \
        --mca btl self,vader -np "$np" -x LD_PRELOAD="$lib" $xs "$exe" $filter "$@" 2>"$log"
    rc=$?
    ;;
mpich)
    : "${PMPI_MPICH_MPIEXEC:=mpiexec.mpich}"
    gs=""
    for v in $vars; do gs="$gs -genv ${v%%=*} ${v#*=}"; done
    # shellcheck disable=SC2086
    timeout -k 10 300 "$PMPI_MPICH_MPIEXEC" -n "$np" -genv LD_PRELOAD "$lib" $gs "$exe" $filter "$@" 2>"$log"
    rc=$?
    ;;
*) echo "unknown flavour $flavour"; exit 99 ;;
esac
end=$(date +%s)
grep -v '^vccl-pmpi\[rank [0-9]*\]: \(created\|destroying\) vccl communicator' "$log" >&2
echo "launcher exit status: $rc, $((end - start)) s"
[ $rc -eq 0 ] || exit 1

created=$(grep -c 'created vccl communicator' "$log")
finalized=$(grep -c '(MPI_Finalize)' "$log")
freed=$(grep -c '(communicator freed)' "$log")
echo "vccl communicators created: $created, destroyed in MPI_Finalize: $finalized, freed with their communicator: $freed"
case $mode in
off)
    [ "$created" -eq 0 ] || { echo "FAIL: vccl was used with VCCL_PMPI=0"; exit 1; } ;;
errors)
    [ "$created" -ge "$np" ] || { echo "FAIL: no vccl communicator on every rank"; exit 1; }
    n=$(grep -c 'MPI_Allreduce on communicator [0-9]*: vccl failed' "$log")
    [ "$n" -eq $((np - 1)) ] || { echo "FAIL: $n ranks logged vccl's error with the MPI call, expected $((np - 1))"; exit 1; } ;;
*)
    # per rank: MPI_COMM_WORLD and the 3 communicators kept alive are left for MPI_Finalize (MPI_COMM_SELF's
    # too, but MPI deletes its attributes last set first, so it may count as freed); the dup/split loop
    # frees 6 dups and 6 halves
    [ "$created" -ge "$np" ] || { echo "FAIL: no vccl communicator on every rank"; exit 1; }
    [ "$finalized" -ge $((4 * np)) ] || { echo "FAIL: vccl communicators left alive were not destroyed in MPI_Finalize"; exit 1; }
    [ "$freed" -ge $((12 * np)) ] || { echo "FAIL: vccl communicators of freed MPI communicators were not destroyed"; exit 1; } ;;
esac
exit 0
