#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# sbatch template: one rank per GPU launched by Open MPI's mpirun inside the allocation, each bound by
# vccl-bind.sh (mpirun's own binding is off so that the GPU-local CPUs from vccl-info win).
#   sbatch contrib/slurm/sbatch-mpirun.sh ./build/vccl-perf -b 8 -e 1G -f 2 -m cuda allreduce
#SBATCH --job-name=vccl-mpirun
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=8
#SBATCH --gpus-per-node=8
#SBATCH --cpus-per-task=8
#SBATCH --exclusive
#SBATCH --time=00:30:00
#SBATCH --output=vccl-mpirun-%j.out
set -euo pipefail

if [ -n "${VCCL_PREFIX:-}" ]; then
    export PATH=$VCCL_PREFIX/bin:$PATH
    export LD_LIBRARY_PATH=$VCCL_PREFIX/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi
here=${VCCL_CONTRIB:-$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)}
[ $# -ge 1 ] || { echo "usage: sbatch sbatch-mpirun.sh COMMAND [ARGS...]" >&2; exit 2; }

per_node=${SLURM_NTASKS_PER_NODE:-8}
nodes=${SLURM_JOB_NUM_NODES:-1}
np=$((per_node * nodes))

# Ranks on other nodes get PATH, LD_LIBRARY_PATH and every VCCL_* variable set here (-x only for variables
# that are set: mpirun warns about the others). Extra mpirun flags (e.g. "--mca btl_tcp_if_include ib0"):
# MPIRUN_FLAGS.
exports=()
for v in PATH LD_LIBRARY_PATH $(compgen -e | grep '^VCCL_' || true); do
    [ -n "${!v+x}" ] && exports+=(-x "$v")
done
# shellcheck disable=SC2086
mpirun -np "$np" --map-by "ppr:${per_node}:node" --bind-to none \
    "${exports[@]}" \
    ${MPIRUN_FLAGS:-} \
    "$here/vccl-bind.sh" "$@"
