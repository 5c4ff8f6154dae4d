#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# MPI_Allreduce on device memory through the coll/vccl component versus staging by hand (cudaMemcpy D2H,
# MPI_Allreduce on host, cudaMemcpy H2D), 8 B to 256 MiB, one process per GPU: the table of docs/PERFORMANCE.md
# ("MPI collectives on device memory through coll_vccl").
#
# Usage: contrib/bench-coll-vccl.sh [BUILD_DIR] [NP] [-- bench_mpi_device options: -b -e -f -n -w]
#   BUILD_DIR  a build configured with CUDA and the Open MPI devel headers (default: build); it must hold
#              tests/coll/bench_mpi_device (make) and coll_vccl/.libs/mca_coll_vccl.so
#   NP         ranks (default: the number of GPUs nvidia-smi lists, at least 2)
# Exit status: bench_mpi_device's (0 done, 1 wrong results, 2 component not loaded, 77 no GPU: skipped).
set -euo pipefail
build=build
np=
if [ $# -gt 0 ] && [ "$1" != -- ]; then build=$1; shift; fi
if [ $# -gt 0 ] && [ "$1" != -- ]; then np=$1; shift; fi
if [ "${1:-}" = -- ]; then shift; fi
if [ -z "$np" ]; then
    ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
    np=$((ngpu >= 2 ? ngpu : 2))
fi

bench=$build/tests/coll/bench_mpi_device
comp=$(cd "$build/coll_vccl/.libs" 2>/dev/null && pwd) || comp=
[ -x "$bench" ] || { echo "bench-coll-vccl.sh: $bench missing: configure --with-cuda, then make" >&2; exit 2; }
[ -n "$comp" ] && [ -f "$comp/mca_coll_vccl.so" ] ||
    { echo "bench-coll-vccl.sh: $build/coll_vccl/.libs/mca_coll_vccl.so missing (needs the Open MPI devel headers)" >&2; exit 2; }
ompi_dir=${VCCL_OMPI_COMPONENT_DIR:-/usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi3}

# The component directory first, then Open MPI's own (the only form ompi_info honours too; coll_vccl(7)).
export OMPI_MCA_mca_base_component_path=$comp:$ompi_dir
set -x
mpirun --allow-run-as-root --oversubscribe --bind-to none --mca pml ob1 --mca btl self,vader -np "$np" \
    -x OMPI_MCA_mca_base_component_path ${LD_LIBRARY_PATH:+-x LD_LIBRARY_PATH} \
    "$bench" -b 8 -e 256M -f 2 -n 20 -w 5 "$@"
