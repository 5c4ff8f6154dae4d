#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Host-memory benchmark behind docs/PERFORMANCE.md: vccl against Open MPI's own collectives, same data, same run.
#
#   contrib/bench-host.sh [VCCL_PERF] [NP...] [-- VCCL_PERF_OPTIONS...]
#
# VCCL_PERF defaults to build/vccl-perf, NP to 2 and 4 ranks. Without options: allreduce, allgather,
# reducescatter and broadcast from 8 B to 64 MiB for each NP. With options after --: one run of
# vccl-perf --baseline mpi OPTIONS for each NP, e.g.
#   contrib/bench-host.sh build/vccl-perf 2 -- -b 512 -e 32K -f 8 -n 4000 -w 200 -c 1 allreduce
# Every VCCL_* variable set in the environment is passed to the ranks (mpirun -x). MPIRUN replaces the launcher.
set -euo pipefail
perf=build/vccl-perf
if [ $# -gt 0 ] && [ "$1" != -- ]; then perf=$1; shift; fi
nps=()
while [ $# -gt 0 ] && [ "$1" != -- ]; do nps+=("$1"); shift; done
[ ${#nps[@]} -gt 0 ] || nps=(2 4)
one=()
if [ $# -gt 0 ]; then
  shift
  one=("$@")
  [ ${#one[@]} -gt 0 ] || { echo "bench-host.sh: no vccl-perf options after --" >&2; exit 2; }
fi
[ -x "$perf" ] || { echo "bench-host.sh: $perf is not executable (build vccl-perf, or name it)" >&2; exit 2; }
: "${MPIRUN:=mpirun --allow-run-as-root --oversubscribe --bind-to none --mca pml ob1 --mca btl self,vader}"
fwd=()
[ -n "${LD_LIBRARY_PATH:-}" ] && fwd+=(-x LD_LIBRARY_PATH)
for v in $(compgen -e); do
  case $v in VCCL_*) fwd+=(-x "$v") ;; esac
done
run() { # NP OPTIONS...
  local np=$1
  shift
  $MPIRUN -np "$np" ${fwd[@]+"${fwd[@]}"} "$perf" --baseline mpi "$@" | grep -v '^#  Rank'
}
for np in "${nps[@]}"; do
  if [ ${#one[@]} -gt 0 ]; then
    echo "## np=$np"; run "$np" "${one[@]}"
    continue
  fi
  for coll in allreduce allgather reducescatter broadcast; do
    echo "## np=$np $coll"; run "$np" -b 8 -e 64M -f 8 -n 20 -w 5 -c 1 "$coll"
  done
done
