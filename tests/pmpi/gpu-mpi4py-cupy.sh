#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# mpi4py on CuPy arrays through the interposer of the MPI that mpi4py uses, 2 ranks (mpi4py_cupy.py).
# Exits 77 (skipped) without a GPU, mpi4py or CuPy, or when mpi4py's MPI is not one configure built for.
set -u
: "${top_builddir:=$(cd "$(dirname "$0")/../.." && pwd)}"
here=$(cd "$(dirname "$0")" && pwd)
probe=$top_builddir/tests/gpu/gpu_probe
[ -x "$probe" ] || { echo "SKIP: $probe not built"; exit 77; }
out=$("$probe" 2>&1) || { echo "SKIP: $out (needs a GPU)"; exit 77; }
py=${PYTHON:-python3}
lib_version=$("$py" -c 'import cupy; from mpi4py import MPI; print(MPI.Get_library_version())' 2>&1) ||
    { echo "SKIP: mpi4py or cupy not importable: $lib_version"; exit 77; }
case $lib_version in
*"Open MPI"*) flavour=openmpi ;;
*MPICH*) flavour=mpich ;;
*) echo "SKIP: mpi4py uses an MPI this test does not know: $lib_version"; exit 77 ;;
esac
lib=$top_builddir/coll_vccl/pmpi/$flavour/.libs/libvccl-pmpi.so
[ -f "$lib" ] || { echo "SKIP: mpi4py uses $flavour, for which no interposer was built"; exit 77; }
# The test library answers the interposer's test points and counts each call's route for the script.
lib="$top_builddir/.libs/libvccl_testing.so:$lib"
echo "mpi4py's MPI: $(echo "$lib_version" | head -n 1); preloading $lib"
if [ $flavour = openmpi ]; then
    timeout -k 10 300 "${PMPI_OMPI_MPIRUN:-mpirun}" --allow-run-as-root --oversubscribe --bind-to none -np 2 \
        -x LD_PRELOAD="$lib" -x VCCL_PMPI_VERBOSE=1 "$py" "$here/mpi4py_cupy.py"
else
    timeout -k 10 300 "${PMPI_MPICH_MPIEXEC:-mpiexec}" -n 2 -genv LD_PRELOAD "$lib" -genv VCCL_PMPI_VERBOSE 1 \
        "$py" "$here/mpi4py_cupy.py"
fi
