#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# What the PMPI interposer costs, in one job: the table of docs/PERFORMANCE.md ("The PMPI interposer").
#   device  MPI_Allreduce on cudaMalloc buffers through libvccl-pmpi.so, through the coll/vccl component, and
#           vcclAllReduce itself with a stream wait after each call as a blocking MPI call has (vccl-perf
#           -m cuda -z 1), float sum; skipped without a GPU
#   host    MPI_Allreduce on host buffers (vccl-perf's MPI baseline) with the interposer preloaded and without
#           it: host buffers must pass through untouched
# The routes alternate within each of ROUNDS rounds (default 3); each figure is the median round's time.
#
# Usage: contrib/bench-pmpi.sh [BUILD_DIR] [NP] [-- size options: -b MIN -e MAX -f FACTOR -n ITERS -w WARMUP]
#   BUILD_DIR  default build; it must hold vccl-perf, coll_vccl/pmpi/openmpi/.libs/libvccl-pmpi.so and, for the
#              device half, tests/coll/bench_mpi_device and coll_vccl/.libs/mca_coll_vccl.so (configure with
#              CUDA and the Open MPI devel headers)
#   NP         ranks (default 2)
# Exit status: 0 done, 1 a wrong result in any run, 2 something missing.
set -uo pipefail
build=build
np=2
if [ $# -gt 0 ] && [ "$1" != -- ]; then build=$1; shift; fi
if [ $# -gt 0 ] && [ "$1" != -- ]; then np=$1; shift; fi
if [ "${1:-}" = -- ]; then shift; fi
sizes=(-b 1K -e 64M -f 4 -n 20 -w 5)
[ $# -gt 0 ] && sizes=("$@")
rounds=${ROUNDS:-3}

pmpi=$build/coll_vccl/pmpi/openmpi/.libs/libvccl-pmpi.so
perf=$build/vccl-perf
bench=$build/tests/coll/bench_mpi_device
comp=$build/coll_vccl/.libs
for f in "$pmpi" "$perf"; do
    [ -e "$f" ] || { echo "bench-pmpi.sh: $f missing (configure found Open MPI? make?)" >&2; exit 2; }
done
ompi_dir=${VCCL_OMPI_COMPONENT_DIR:-/usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi3}
mpirun=(mpirun --allow-run-as-root --oversubscribe --bind-to none --mca pml ob1 --mca btl self,vader -np "$np")
[ -n "${LD_LIBRARY_PATH:-}" ] && mpirun+=(-x LD_LIBRARY_PATH)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
wrong=0

# run NAME FIELD COMMAND...: appends "size time" lines of one round to $work/NAME; FIELD is the time column
run() {
    local name=$1 field=$2 out
    shift 2
    out=$("$@" 2>&1)
    local rc=$?
    if [ $rc -eq 77 ]; then return 77; fi
    if [ $rc -ne 0 ] || grep -q FAILED <<<"$out"; then
        echo "bench-pmpi.sh: $name failed (exit $rc):" >&2
        tail -n 20 <<<"$out" >&2
        wrong=1
        return 1
    fi
    awk -v f="$field" '$1 ~ /^[0-9]+$/ { print $1, $f }' <<<"$out" >>"$work/$name"
}

# median NAME SIZE: the median time of NAME at SIZE over the rounds
median() {
    awk -v s="$2" '$1 == s { print $2 }' "$work/$1" 2>/dev/null | sort -g | awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)]; else print "-" }'
}

table() { # table TITLE A B C...: one row per size, the routes' medians and the ratios of the first to the others
    local title=$1
    shift
    local first=$1
    echo "# $title (median of $rounds rounds, $np ranks; times in us)"
    printf '# %10s' size
    for r in "$@"; do printf ' %16s' "$r"; done
    for r in "${@:2}"; do printf ' %16s' "$first/$r"; done
    echo
    for s in $(awk '{ print $1 }' "$work/$first" | sort -n -u); do
        printf '  %10s' "$s"
        local t0 t
        t0=$(median "$first" "$s")
        for r in "$@"; do printf ' %16s' "$(median "$r" "$s")"; done
        for r in "${@:2}"; do
            t=$(median "$r" "$s")
            awk -v a="$t0" -v b="$t" 'BEGIN { if (a + 0 > 0 && b + 0 > 0) printf " %16.3f", a / b; else printf " %16s", "-" }'
        done
        echo
    done
}

device=1
if [ ! -x "$bench" ] || [ ! -f "$comp/mca_coll_vccl.so" ]; then
    echo "# device half skipped: $bench or $comp/mca_coll_vccl.so missing"
    device=0
fi
echo "# bench-pmpi.sh: $(date -u +%F), $(hostname), sizes ${sizes[*]}, $rounds rounds"
for ((i = 1; i <= rounds; i++)); do
    if [ $device = 1 ]; then
        # bench_mpi_device's vccl time is field 6; vccl-perf's out-of-place time field 6
        run interposer 6 "${mpirun[@]}" -x LD_PRELOAD="$pmpi" -x VCCL_PMPI_HOST=0 "$bench" "${sizes[@]}"
        if [ $? -eq 77 ]; then
            echo "# device half skipped: no GPU"
            device=0
        else
            run component 6 "${mpirun[@]}" -x OMPI_MCA_mca_base_component_path="$(cd "$comp" && pwd):$ompi_dir" \
                "$bench" "${sizes[@]}"
            run vcclAllReduce 6 "${mpirun[@]}" "$perf" -m cuda -z 1 "${sizes[@]}" allreduce
        fi
    fi
    # vccl-perf's MPI baseline time is field 14
    run host_preloaded 14 "${mpirun[@]}" -x LD_PRELOAD="$pmpi" -x VCCL_PMPI_HOST=0 "$perf" -m host --baseline mpi \
        "${sizes[@]}" allreduce
    run host_plain 14 "${mpirun[@]}" "$perf" -m host --baseline mpi "${sizes[@]}" allreduce
done
[ $device = 1 ] && table "MPI_Allreduce on device memory" interposer component vcclAllReduce
table "MPI_Allreduce on host memory" host_preloaded host_plain
exit $wrong
