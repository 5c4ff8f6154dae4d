#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# run_megatron_gpt.sh - the real Megatron-LM (tiny GPT, mock data, no Transformer Engine or apex) on vccl,
# launched by contrib/megatron/launch-megatron.sh under mpirun and under srun, TP=2 x PP=2 x DP=2 with the
# distributed optimizer (8 ranks), ITERS iterations (default 50), same seed in every run:
#   1. vccl under mpirun;
#   2. vccl under srun: a real Slurm allocation when SLURM_JOB_ID is set, otherwise a stand-in srun that starts
#      the tasks at once with SLURM_PROCID/SLURM_LOCALID/SLURM_NTASKS set, as Slurm does on one node;
#   3. a reference: with at least 8 GPUs, the same job on the NCCL torch brings (VCCL_USE_NCCL=1); with fewer,
#      vccl with DP=1 (4 ranks, the same global batch by gradient accumulation), which runs the same model
#      without the data-parallel reduce-scatter and all-gather: the losses must agree within bf16 tolerance.
# Checks: every run logs ITERS losses and ends below where it started; the srun run and the reference agree with
# the mpirun run within RTOL (relative, default 0.02 for bf16) at every iteration (not bit for bit: the
# embedding's backward adds with atomics, so even one layout run twice differs in the last bits). Prints the median step time of every run.
# Ranks outnumbering the GPUs share them (vccl allows ranks of one communicator on one GPU; NCCL does not).
#
#   MEGATRON_DIR=/path/to/Megatron-LM tests/nccl_compat/run_megatron_gpt.sh [BUILD_DIR]
#
# MEGATRON_DIR: a Megatron-LM checkout (core_v0.19 tested) with pretrain_gpt.py. MEGATRON_ENTRY: the Python
# file each rank runs (default $MEGATRON_DIR/pretrain_gpt.py; a wrapper that runs it is fine). Exits 77 (skip)
# without torch, a GPU or MEGATRON_DIR. Also ITERS, RTOL, PYTHON, MPIRUN, TIMEOUT (each run, s; default 600).
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
top=$(cd "$here/../.." && pwd)
build=${1:-${top_builddir:-$top/build}}
py=${PYTHON:-python3}
iters=${ITERS:-50}
rtol=${RTOL:-0.02}
run_timeout=${TIMEOUT:-600}
launch=$top/contrib/megatron/launch-megatron.sh

[ -n "${MEGATRON_DIR:-}" ] && [ -f "$MEGATRON_DIR/pretrain_gpt.py" ] || {
    echo "SKIP: set MEGATRON_DIR to a Megatron-LM checkout (with pretrain_gpt.py)"
    exit 77
}
entry=${MEGATRON_ENTRY:-$MEGATRON_DIR/pretrain_gpt.py}
"$py" -c 'import torch' >/dev/null 2>&1 || { echo "SKIP: torch is not installed for $py"; exit 77; }
ngpu=$("$py" -c 'import torch; print(torch.cuda.device_count() if torch.cuda.is_available() else 0)' 2>/dev/null || echo 0)
case $ngpu in '' | *[!0-9]*) ngpu=0 ;; esac
[ "$ngpu" -ge 1 ] || { echo "SKIP: needs a CUDA GPU, torch sees none"; exit 77; }
nccl_dir=$build/src/nccl_compat/.libs
[ -e "$nccl_dir/libnccl.so.2" ] || { echo "FAIL: $nccl_dir/libnccl.so.2 not built"; exit 1; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Each rank: its GPU is its local rank modulo the GPUs (Megatron calls torch.cuda.set_device(LOCAL_RANK)).
cat >"$tmp/rank.sh" <<'EOF'
#!/usr/bin/env bash
lr=${OMPI_COMM_WORLD_LOCAL_RANK:-${SLURM_LOCALID:-0}}
export LOCAL_RANK=$((lr % NGPU))
exec "$LAUNCH" "$PY" "$ENTRY" "$@"
EOF
# A stand-in srun for one node: starts --ntasks tasks at once with Slurm's variables and waits for all.
cat >"$tmp/srun" <<'EOF'
#!/usr/bin/env bash
ntasks=${SLURM_NTASKS:-1}
while [ $# -gt 0 ]; do
    case $1 in
    --ntasks=*) ntasks=${1#--ntasks=} ;;
    -n) ntasks=$2; shift ;;
    --*) ;;
    *) break ;;
    esac
    shift
done
pids=()
for ((t = 0; t < ntasks; t++)); do
    SLURM_PROCID=$t SLURM_LOCALID=$t SLURM_NTASKS=$ntasks SLURM_NTASKS_PER_NODE=$ntasks SLURM_NODELIST=$(hostname) \
        SLURM_JOB_ID=${SLURM_JOB_ID:-1} "$@" &
    pids+=($!)
done
rc=0
for p in "${pids[@]}"; do wait "$p" || rc=$?; done
exit $rc
EOF
chmod +x "$tmp/rank.sh" "$tmp/srun"

export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export CUDA_DEVICE_MAX_CONNECTIONS=1 TORCHDYNAMO_DISABLE=1 OMP_NUM_THREADS=1 PYTHONUNBUFFERED=1 NO_VCS_VERSION=1
export PYTHONPATH=$MEGATRON_DIR${PYTHONPATH:+:$PYTHONPATH}
export VCCL_NCCL_DIR=$nccl_dir NGPU=$ngpu LAUNCH=$launch PY=$py ENTRY=$entry MASTER_ADDR=127.0.0.1

args() { # args TP PP: tiny GPT, the same shape and seed in every run
    echo --tensor-model-parallel-size "$1" --pipeline-model-parallel-size "$2" \
        --num-layers 4 --hidden-size 128 --num-attention-heads 4 --seq-length 128 --max-position-embeddings 128 \
        --micro-batch-size 2 --global-batch-size 16 --train-iters "$iters" --lr 1e-3 --min-lr 1e-4 \
        --lr-decay-style cosine --lr-warmup-iters 5 --weight-decay 0.01 --clip-grad 1.0 --init-method-std 0.02 \
        --seed 1234 --transformer-impl local --no-gradient-accumulation-fusion --no-masked-softmax-fusion \
        --no-persist-layer-norm --mock-data --tokenizer-type NullTokenizer --vocab-size 1024 --eval-iters 0 \
        --eval-interval "$iters" --log-interval 1 --num-workers 0 --distributed-backend nccl \
        --distributed-timeout-minutes 5 --no-one-logger --disable-gloo-process-groups --bf16 \
        --use-distributed-optimizer
}
mpirun_cmd=(timeout -k 15 "$run_timeout" "${MPIRUN:-mpirun}" --allow-run-as-root --oversubscribe --bind-to none)
fails=0
result() { echo "$1: $2"; [ "${2%% *}" = PASS ] || fails=$((fails + 1)); }

run() { # run NAME NPROC TP PP [ENV...]: one training run; writes $tmp/NAME.loss ("iter loss") and .time
    local name=$1 n=$2 tp=$3 pp=$4 rc
    shift 4
    local port=$((20000 + RANDOM % 20000))
    echo "== $name: $n ranks, TP=$tp PP=$pp DP=$((n / tp / pp))"
    if [ "$name" = srun ] && [ -z "${SLURM_JOB_ID:-}" ]; then
        env "$@" MASTER_PORT=$port timeout -k 15 "$run_timeout" "$tmp/srun" --ntasks="$n" "$tmp/rank.sh" $(args "$tp" "$pp") \
            >"$tmp/$name.log" 2>&1
    elif [ "$name" = srun ]; then
        env "$@" MASTER_PORT=$port timeout -k 15 "$run_timeout" srun --ntasks="$n" --mpi=pmix "$tmp/rank.sh" $(args "$tp" "$pp") \
            >"$tmp/$name.log" 2>&1
    else
        local xs=()
        for v in PYTHONPATH NCCL_NVLS_ENABLE TORCH_SYMM_MEM_DISABLE_MULTICAST NVSHMEM_DISABLE_NVLS CUDA_DEVICE_MAX_CONNECTIONS \
            TORCHDYNAMO_DISABLE OMP_NUM_THREADS PYTHONUNBUFFERED NO_VCS_VERSION VCCL_NCCL_DIR NGPU LAUNCH PY ENTRY \
            MASTER_ADDR; do xs+=(-x "$v"); done
        for e in "$@" MASTER_PORT=$port; do xs+=(-x "$e"); done
        "${mpirun_cmd[@]}" -np "$n" "${xs[@]}" "$tmp/rank.sh" $(args "$tp" "$pp") >"$tmp/$name.log" 2>&1
    fi
    rc=$?
    # Megatron's last rank prints "iteration N/ M | ... | elapsed time per iteration (ms): T | ... lm loss: X |".
    sed -n 's/.* iteration *\([0-9]*\)\/ *[0-9]* |.*per iteration (ms): *\([0-9.]*\) |.* lm loss: \([0-9.eE+-]*\) |.*/\1 \3 \2/p' \
        "$tmp/$name.log" >"$tmp/$name.loss"
    local got
    got=$(wc -l <"$tmp/$name.loss")
    if [ $rc -ne 0 ] || [ "$got" -lt "$iters" ]; then
        result "$name" "FAIL (exit $rc, $got of $iters iterations logged)"
        tail -n 40 "$tmp/$name.log"
        return 1
    fi
    local verdict
    local med
    med=$(awk '{ print $3 }' "$tmp/$name.loss" | sort -n | awk '{ t[NR] = $1 } END { print t[int((NR + 1) / 2)] }')
    verdict=$(awk -v med="$med" 'NR == 1 { first = $2 } { last = $2 } END {
        printf "%s first %.4f last %.4f median step %s ms", (last < first ? "PASS" : "FAIL"), first, last, med }' "$tmp/$name.loss")
    result "$name" "$verdict"
}

compare() { # compare A B TOLERANCE: losses iteration by iteration
    local out
    out=$(awk -v tol="$3" 'NR == FNR { a[$1] = $2; next } ($1 in a) { n++; d = a[$1] - $2; if (d < 0) d = -d;
        r = d / ($2 < 0 ? -$2 : $2); if (r > worst) { worst = r; at = $1 } }
        END { if (n == 0) { print "FAIL (no common iterations)"; exit }
              printf "%s worst relative difference %.2e at iteration %d over %d iterations (tolerance %s)",
                     (worst <= tol ? "PASS" : "FAIL"), worst, at, n, tol }' "$tmp/$1.loss" "$tmp/$2.loss")
    result "$1 vs $2" "$out"
}

run mpirun 8 2 2 && have_mpirun=1 || have_mpirun=0
run srun 8 2 2 && have_srun=1 || have_srun=0
[ $have_mpirun = 1 ] && [ $have_srun = 1 ] && compare mpirun srun "$rtol"
if [ "$ngpu" -ge 8 ]; then
    run nccl 8 2 2 VCCL_USE_NCCL=1 && [ $have_mpirun = 1 ] && compare mpirun nccl "$rtol"
else
    echo "== NCCL not run: it refuses ranks of one communicator sharing a GPU ($ngpu GPU(s), 8 ranks)"
    run dp1 4 2 2 && [ $have_mpirun = 1 ] && compare mpirun dp1 "$rtol"
fi
echo "run_megatron_gpt: $fails failed"
[ $fails -eq 0 ]
