#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Device-memory benchmark behind docs/PERFORMANCE.md: vccl against the system NCCL on the same buffers and
# stream, one process per GPU, NVLink multicast off (NCCL_NVLS_ENABLE=0).
#
#   contrib/bench-gpu.sh [VCCL_PERF] [NP] [-- VCCL_PERF_OPTIONS...]
#
# VCCL_PERF is the vccl-perf of a CUDA build (default build/vccl-perf), NP the number of ranks (default 2).
# Without options: the sweep below (send/recv 8 B to 1 GiB, 200 back-to-back small send/recv, each
# collective 8 B to 512 MiB). With options after --: one run of vccl-perf -m cuda --baseline nccl OPTIONS,
# the form the tables of docs/PERFORMANCE.md give, e.g.
#   contrib/bench-gpu.sh build/vccl-perf 2 -- -b 8 -e 512M -f 4 -n 20 -w 5 -c 1 allreduce
# Every VCCL_* variable set in the environment is passed to the ranks (mpirun -x), e.g.
#   VCCL_REDUCE_PIPELINE_BYTES=0 contrib/bench-gpu.sh build/vccl-perf 2 -- --concurrent-gemm -b 1G -e 1G -n 20 -w 3 -c 1 allreduce
# MPIRUN replaces the launcher (default below; it must accept -np and -x).
set -euo pipefail
perf=build/vccl-perf
np=2
if [ $# -gt 0 ] && [ "$1" != -- ]; then perf=$1; shift; fi
if [ $# -gt 0 ] && [ "$1" != -- ]; then np=$1; shift; fi
one=()
if [ $# -gt 0 ]; then
  [ "$1" = -- ] || { echo "usage: $0 [VCCL_PERF] [NP] [-- VCCL_PERF_OPTIONS...]" >&2; exit 2; }
  shift
  one=("$@")
  [ ${#one[@]} -gt 0 ] || { echo "bench-gpu.sh: no vccl-perf options after --" >&2; exit 2; }
fi
[ -x "$perf" ] || { echo "bench-gpu.sh: $perf is not executable (build vccl-perf with CUDA, or name it)" >&2; exit 2; }
export NCCL_NVLS_ENABLE=0
: "${MPIRUN:=mpirun --allow-run-as-root --oversubscribe --bind-to none --mca pml ob1 --mca btl self,vader}"
fwd=(-x NCCL_NVLS_ENABLE)
[ -n "${LD_LIBRARY_PATH:-}" ] && fwd+=(-x LD_LIBRARY_PATH)
for v in $(compgen -e); do
  case $v in VCCL_*) fwd+=(-x "$v") ;; esac
done
run() {
  $MPIRUN -np "$np" "${fwd[@]}" "$perf" -m cuda --baseline nccl "$@" | grep -v '^#  Rank'
}
if [ ${#one[@]} -gt 0 ]; then
  run "${one[@]}"
  exit
fi
echo "## sendrecv, 8 B to 1 GiB"; run -b 8 -e 1G -f 4 -n 20 -w 5 -c 1 sendrecv
echo "## sendrecv latency, 200 back-to-back ops"; run -b 8 -e 32K -f 8 -n 200 -w 20 -c 1 sendrecv
for coll in allreduce allgather reducescatter broadcast alltoall; do
  echo "## $coll"; run -b 8 -e 512M -f 64 -n 10 -w 3 -c 1 "$coll"
done
