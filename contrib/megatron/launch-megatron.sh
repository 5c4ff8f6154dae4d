#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# launch-megatron.sh COMMAND [ARGS...] - runs one Megatron-LM (or any torch.distributed "env://") rank on
# vccl: derives the torch.distributed environment from the launcher and puts libvccl-nccl first.
#
#   mpirun -np 16 --map-by ppr:8:node --bind-to none -x VCCL_PREFIX \
#       contrib/megatron/launch-megatron.sh python pretrain_gpt.py --tensor-model-parallel-size 2 ...
#   srun --mpi=pmix --ntasks-per-node=8 contrib/megatron/launch-megatron.sh python pretrain_gpt.py ...
#   (combine with contrib/slurm/vccl-bind.sh for NIC/CPU binding: ... vccl-bind.sh launch-megatron.sh ...)
#
# Sets RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE from Open MPI (OMPI_COMM_WORLD_*) or Slurm (SLURM_*)
# unless already set (torchrun sets them itself: then only the library selection below applies), and
# MASTER_ADDR/MASTER_PORT: MASTER_ADDR defaults to the first host of the Slurm allocation, or under Open MPI
# to the address of the mpirun host (from OMPI_MCA_orte_hnp_uri); MASTER_PORT defaults to 29500 (+ the Slurm
# job id mod 1000).
#
# Library selection: VCCL_NCCL_DIR (default: $VCCL_PREFIX/lib/vccl/nccl, which holds libnccl.so.2 =
# libvccl-nccl) goes first in LD_LIBRARY_PATH. PyTorch wheels load the NCCL of the nvidia-nccl-cu* package
# through their RPATH, which LD_LIBRARY_PATH does not override: VCCL_NCCL_PRELOAD=1 (the default) also puts
# libnccl.so.2 into LD_PRELOAD, so the dynamic linker sees a loaded libnccl.so.2 (our SONAME) and binds
# torch's NCCL calls to vccl. VCCL_NCCL_PRELOAD=0 keeps LD_PRELOAD untouched; VCCL_USE_NCCL=1 leaves the
# real NCCL in place (for comparisons).
set -euo pipefail

# Switches take 0/1 and the words vccl itself takes for booleans (no/off/false, yes/on/true).
off() { case ${1,,} in 0 | n | no | false | off) return 0 ;; esac; return 1; }
on() { case ${1,,} in 1 | y | yes | true | on) return 0 ;; esac; return 1; }

if [ $# -lt 1 ]; then
    echo "usage: launch-megatron.sh COMMAND [ARGS...]" >&2
    exit 2
fi

if [ -n "${OMPI_COMM_WORLD_RANK:-}" ]; then
    : "${RANK:=$OMPI_COMM_WORLD_RANK}"
    : "${WORLD_SIZE:=$OMPI_COMM_WORLD_SIZE}"
    : "${LOCAL_RANK:=${OMPI_COMM_WORLD_LOCAL_RANK:-0}}"
    : "${LOCAL_WORLD_SIZE:=${OMPI_COMM_WORLD_LOCAL_SIZE:-1}}"
    if [ -z "${MASTER_ADDR:-}" ]; then
        # orte_hnp_uri looks like "1234.0;tcp://10.1.2.3,192.168.0.5:41234": the mpirun host's addresses.
        uri=${OMPI_MCA_orte_hnp_uri:-}
        addr=${uri#*tcp://}
        addr=${addr%%[,:]*}
        if [ -n "$uri" ] && [ "$addr" != "$uri" ] && [ -n "$addr" ]; then
            MASTER_ADDR=$addr
        elif [ "${OMPI_COMM_WORLD_SIZE}" = "${OMPI_COMM_WORLD_LOCAL_SIZE:-}" ]; then
            MASTER_ADDR=127.0.0.1 # all ranks on this host
        else
            echo "launch-megatron.sh: set MASTER_ADDR (mpirun -x MASTER_ADDR=<host of rank 0>)" >&2
            exit 2
        fi
    fi
elif [ -n "${SLURM_PROCID:-}" ]; then
    : "${RANK:=$SLURM_PROCID}"
    : "${WORLD_SIZE:=${SLURM_NTASKS:-1}}"
    : "${LOCAL_RANK:=${SLURM_LOCALID:-0}}"
    : "${LOCAL_WORLD_SIZE:=${SLURM_NTASKS_PER_NODE:-1}}"
    LOCAL_WORLD_SIZE=${LOCAL_WORLD_SIZE%%(*} # "8(x2)" -> 8
    if [ -z "${MASTER_ADDR:-}" ]; then
        # sed reads the whole list: "| head -n 1" would end scontrol with SIGPIPE on a long list, and
        # pipefail would then stop this script.
        MASTER_ADDR=$({ scontrol show hostnames "${SLURM_JOB_NODELIST:-$(hostname)}" 2>/dev/null || true; } | sed -n 1p)
        : "${MASTER_ADDR:=$(hostname)}"
    fi
    : "${MASTER_PORT:=$((29500 + ${SLURM_JOB_ID:-0} % 1000))}"
fi
: "${RANK:=0}" "${WORLD_SIZE:=1}" "${LOCAL_RANK:=0}" "${LOCAL_WORLD_SIZE:=1}"
: "${MASTER_ADDR:=127.0.0.1}" "${MASTER_PORT:=29500}"
export RANK WORLD_SIZE LOCAL_RANK LOCAL_WORLD_SIZE MASTER_ADDR MASTER_PORT

# Megatron-LM needs this for its tensor/sequence parallel overlap.
export CUDA_DEVICE_MAX_CONNECTIONS=${CUDA_DEVICE_MAX_CONNECTIONS:-1}

if ! on "${VCCL_USE_NCCL:-0}"; then
    nccl_dir=${VCCL_NCCL_DIR:-${VCCL_PREFIX:+$VCCL_PREFIX/lib/vccl/nccl}}
    if [ -z "$nccl_dir" ] && command -v vccl-info >/dev/null 2>&1; then
        nccl_dir=$(dirname "$(command -v vccl-info)")/../lib/vccl/nccl
    fi
    if [ -z "$nccl_dir" ] || [ ! -e "$nccl_dir/libnccl.so.2" ]; then
        echo "launch-megatron.sh: no libnccl.so.2 of vccl in '${nccl_dir:-}' (set VCCL_PREFIX or VCCL_NCCL_DIR," \
            "or VCCL_USE_NCCL=1 for the real NCCL)" >&2
        exit 2
    fi
    export LD_LIBRARY_PATH=$nccl_dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    if ! off "${VCCL_NCCL_PRELOAD:-1}"; then
        export LD_PRELOAD=$nccl_dir/libnccl.so.2${LD_PRELOAD:+:$LD_PRELOAD}
    fi
fi

if [ "$RANK" = 0 ]; then
    echo "launch-megatron.sh: world=$WORLD_SIZE master=$MASTER_ADDR:$MASTER_PORT" \
        "nccl=$(on "${VCCL_USE_NCCL:-0}" && echo 'real NCCL' || echo "vccl ($nccl_dir)")" >&2
fi
exec "$@"
