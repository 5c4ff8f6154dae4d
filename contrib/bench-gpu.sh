#!/usr/bin/env bash
# Device-memory benchmark of docs/PERFORMANCE.md: vccl vs the system NCCL on the same buffers and stream,
# one process per GPU. NVLink multicast stays off.
# Usage: contrib/bench-gpu.sh [VCCL_PERF] [NP]   (default: build/vccl-perf, 2 ranks)
set -euo pipefail
perf=${1:-build/vccl-perf}
np=${2:-2}
export NCCL_NVLS_ENABLE=0
run() {
  mpirun --allow-run-as-root --oversubscribe --bind-to none --mca pml ob1 --mca btl self,vader -np "$np" \
    -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE "$perf" -m cuda --baseline nccl "$@" | grep -v '^#  Rank'
}
echo "## sendrecv, 8 B to 1 GiB"; run -b 8 -e 1G -f 4 -n 20 -w 5 -c 1 sendrecv
echo "## sendrecv latency, 200 back-to-back ops"; run -b 8 -e 32K -f 8 -n 200 -w 20 -c 1 sendrecv
for coll in allreduce allgather reducescatter broadcast alltoall; do
  echo "## $coll"; run -b 8 -e 512M -f 64 -n 10 -w 3 -c 1 "$coll"
done
