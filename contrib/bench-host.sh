#!/usr/bin/env bash
# Host-memory benchmark of docs/PERFORMANCE.md: vccl vs Open MPI's own collectives, same data, same run.
# Usage: contrib/bench-host.sh [VCCL_PERF] [NP...]   (default: build/vccl-perf, 2 and 4 ranks)
set -euo pipefail
perf=${1:-build/vccl-perf}
shift || true
nps=${*:-2 4}
for np in $nps; do
  for coll in allreduce allgather reducescatter broadcast; do
    echo "## np=$np $coll"
    mpirun --allow-run-as-root --oversubscribe --bind-to none --mca pml ob1 --mca btl self,vader -np "$np" \
      -x LD_LIBRARY_PATH "$perf" -b 8 -e 64M -f 8 -n 20 -w 5 -c 1 --baseline mpi "$coll" | grep -v '^#  Rank'
  done
done
