#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Sets everything up on a fresh Debian 12 machine and runs the main job: vccl-perf allreduce on 4 local
# ranks (host memory when there is no GPU), side by side with Open MPI's MPI_Allreduce.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
"$top/contrib/install-deps.sh"
"$top/contrib/build.sh"
build=${BUILD_DIR:-$top/build}
exec mpirun --allow-run-as-root --oversubscribe --bind-to none --mca pml ob1 --mca btl self,vader -np 4 \
  "$build/vccl-perf" -b 8 -e 64M -f 4 -n 20 -w 5 -c 1 --baseline mpi allreduce
