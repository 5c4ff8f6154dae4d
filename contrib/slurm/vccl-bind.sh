#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# vccl-bind.sh COMMAND [ARGS...] - binds this rank to the GPU, NICs and CPUs that `vccl-info -t --json`
# chose for its local rank, then execs COMMAND. Use it between the launcher and the program:
#   srun ... vccl-bind.sh ./train      mpirun ... vccl-bind.sh ./train
#
# Local rank: VCCL_BIND_LOCAL_RANK, else OMPI_COMM_WORLD_LOCAL_RANK, MPI_LOCALRANKID, SLURM_LOCALID,
# LOCAL_RANK, else 0. Exports, from the entry of "choices" for that local rank:
#   CUDA_VISIBLE_DEVICES=<gpu> (with CUDA_DEVICE_ORDER=PCI_BUS_ID, as vccl-info numbers GPUs in PCI order),
#   VCCL_NET_DEVICES=<primary>, VCCL_BACKUP_NET_DEVICES=<backup>, VCCL_PROXY_CPUS=<proxy_cpus>,
# and runs COMMAND under `taskset -c <CPUs of the GPU's NUMA node that this process may use>` (none of them:
# a message, and no CPU binding).
# Knobs: VCCL_BIND_GPU=0 leaves CUDA_VISIBLE_DEVICES alone (the program picks its GPU by local rank);
# VCCL_BIND_CPUS=0 skips taskset; VCCL_BIND_NET=0 leaves the VCCL_*NET_DEVICES/VCCL_PROXY_CPUS alone;
# VCCL_BIND_TOPO_JSON=FILE reads a saved `vccl-info -t --json` instead of running vccl-info (the sbatch
# templates save one per node); VCCL_INFO_PATH names vccl-info; VCCL_BIND_VERBOSE=1 prints the binding.
set -euo pipefail

if [ $# -lt 1 ]; then
    echo "usage: vccl-bind.sh COMMAND [ARGS...]" >&2
    exit 2
fi

# Switches take 0/1 and the words vccl itself takes for booleans (no/off/false, yes/on/true).
off() { case ${1,,} in 0 | n | no | false | off) return 0 ;; esac; return 1; }
on() { case ${1,,} in 1 | y | yes | true | on) return 0 ;; esac; return 1; }

# The MPI launcher's local rank before Slurm's: under mpirun inside an sbatch job every rank inherits the batch
# step's SLURM_LOCALID=0; srun (PMIx) sets no OMPI_* variable before the program starts.
local_rank=${VCCL_BIND_LOCAL_RANK:-${OMPI_COMM_WORLD_LOCAL_RANK:-${MPI_LOCALRANKID:-${SLURM_LOCALID:-${LOCAL_RANK:-0}}}}}

if [ -n "${VCCL_BIND_TOPO_JSON:-}" ] && [ -s "${VCCL_BIND_TOPO_JSON}" ]; then
    json=$(cat "$VCCL_BIND_TOPO_JSON")
else
    json=$("${VCCL_INFO_PATH:-vccl-info}" -t --json) || {
        echo "vccl-bind.sh: '${VCCL_INFO_PATH:-vccl-info} -t --json' failed; running without binding" >&2
        exec "$@"
    }
fi

# One line: gpu|primary|backup|proxy_cpus|gpu_cpulist (empty fields when unknown; "|" because read would
# merge empty tab-separated fields).
# A saved file or vccl-info output that cannot be read leaves the rank unbound (with a message), never stopped.
binding=$(printf '%s' "$json" | python3 -c '
import json, os, sys
try:
    lr = int(sys.argv[1])
except ValueError:
    sys.stderr.write("vccl-bind.sh: local rank %r is not a number; not binding\n" % sys.argv[1])
    sys.exit(0)
try:
    topo = (json.load(sys.stdin) or {}).get("topology") or {}
except ValueError as e:
    sys.stderr.write("vccl-bind.sh: cannot read the topology (%s); not binding\n" % e)
    sys.exit(0)
choices = topo.get("choices") or []
if not choices:
    sys.exit(0)
if lr >= len(choices):
    sys.stderr.write("vccl-bind.sh: local rank %d but %d choices (one per GPU); using %d\n" % (lr, len(choices), lr % len(choices)))
c = [x for x in choices if x.get("local_rank") == lr % len(choices)] or [choices[lr % len(choices)]]
c = c[0]
gpu = c.get("gpu", -1)
gpus = topo.get("gpus") or []
cpus = gpus[gpu].get("cpulist", "") if 0 <= gpu < len(gpus) else ""
if cpus:
    # Only CPUs this process may use (a Slurm cgroup or cpuset may hold fewer than the NUMA node of the GPU):
    # taskset fails outright on a list with none of them, which would stop the rank before it starts.
    want = set()
    for part in cpus.split(","):
        lo, _, hi = part.partition("-")
        if lo.strip().isdigit() and (hi or lo).strip().isdigit():
            want.update(range(int(lo), int(hi or lo) + 1))
    allowed = sorted(want & os.sched_getaffinity(0))
    if not allowed:
        sys.stderr.write("vccl-bind.sh: none of the CPUs of GPU %d (%s) may be used by this process; not binding CPUs\n" % (gpu, cpus))
    cpus = ",".join(str(cpu) for cpu in allowed)
print("|".join([str(gpu) if gpu >= 0 else "", c.get("primary") or "", c.get("backup") or "", c.get("proxy_cpus") or "", cpus or ""]))
' "$local_rank") || binding=""

if [ -z "$binding" ]; then
    on "${VCCL_BIND_VERBOSE:-0}" && echo "vccl-bind.sh: no rail choices on $(hostname) (no GPU?); not binding" >&2
    exec "$@"
fi
IFS="|" read -r gpu primary backup proxy_cpus gpu_cpus <<<"$binding"

if ! off "${VCCL_BIND_GPU:-1}" && [ -n "$gpu" ]; then
    export CUDA_DEVICE_ORDER=PCI_BUS_ID
    export CUDA_VISIBLE_DEVICES=$gpu
fi
if ! off "${VCCL_BIND_NET:-1}"; then
    [ -n "$primary" ] && export VCCL_NET_DEVICES=$primary
    [ -n "$backup" ] && export VCCL_BACKUP_NET_DEVICES=$backup
    [ -n "$proxy_cpus" ] && export VCCL_PROXY_CPUS=$proxy_cpus
fi
if on "${VCCL_BIND_VERBOSE:-0}"; then
    echo "vccl-bind.sh: $(hostname) local rank $local_rank: gpu=${gpu:-?} nic=${primary:-?} backup=${backup:-none}" \
        "proxy_cpus=${proxy_cpus:-?} cpus=${gpu_cpus:-all}" >&2
fi
if ! off "${VCCL_BIND_CPUS:-1}" && [ -n "$gpu_cpus" ] && command -v taskset >/dev/null 2>&1; then
    exec taskset -c "$gpu_cpus" "$@"
fi
exec "$@"
