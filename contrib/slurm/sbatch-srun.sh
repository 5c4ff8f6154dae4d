#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# sbatch template: one rank per GPU launched by srun over PMIx, each bound by vccl-bind.sh.
#   sbatch contrib/slurm/sbatch-srun.sh ./build/vccl-perf -b 8 -e 1G -f 2 -m cuda allreduce
# Adjust the #SBATCH lines (nodes, GPUs per node, partition, time) to your cluster.
#SBATCH --job-name=vccl
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=8
#SBATCH --gpus-per-node=8
#SBATCH --cpus-per-task=8
#SBATCH --exclusive
#SBATCH --time=00:30:00
#SBATCH --output=vccl-%j.out
set -euo pipefail

# VCCL_PREFIX: where vccl is installed (bin/vccl-info, lib/). Default: found from vccl-info on PATH.
if [ -n "${VCCL_PREFIX:-}" ]; then
    export PATH=$VCCL_PREFIX/bin:$PATH
    export LD_LIBRARY_PATH=$VCCL_PREFIX/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi
here=${VCCL_CONTRIB:-$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)}
[ $# -ge 1 ] || { echo "usage: sbatch sbatch-srun.sh COMMAND [ARGS...]" >&2; exit 2; }

# One topology snapshot per node, shared by its ranks (vccl-info runs once per node, not once per rank).
topo_dir=${VCCL_TOPO_DIR:-${SLURM_SUBMIT_DIR:-$PWD}/vccl-topo-${SLURM_JOB_ID:-local}}
mkdir -p "$topo_dir"
srun --ntasks-per-node=1 --ntasks="${SLURM_JOB_NUM_NODES:-1}" \
    bash -c "vccl-info -t --json > '$topo_dir'/\$(hostname).json"

# --cpu-bind=none and --gpu-bind=none: vccl-bind.sh does the binding; --mpi=pmix: vccl_mpi/MPI programs.
srun --mpi=pmix --cpu-bind=none --gpu-bind=none --kill-on-bad-exit=1 \
    bash -c "VCCL_BIND_TOPO_JSON='$topo_dir'/\$(hostname).json exec '$here/vccl-bind.sh' \"\$@\"" vccl-bind "$@"
