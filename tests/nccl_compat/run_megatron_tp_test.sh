#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# run_megatron_tp_test.sh [BUILD_DIR] - megatron_tp_test.py (Megatron-style tensor and sequence parallel MLP,
# checked against the whole model on every rank) on 2 ranks, launched the way a Megatron-LM job is:
# mpirun -np 2 contrib/megatron/launch-megatron.sh python3 megatron_tp_test.py. launch-megatron.sh derives
# RANK/WORLD_SIZE/LOCAL_RANK/MASTER_ADDR from Open MPI and preloads vccl's libnccl.so.2 (VCCL_NCCL_DIR:
# default BUILD_DIR/src/nccl_compat/.libs). With 2 GPUs the same launch then runs on the real NCCL
# (VCCL_USE_NCCL=1) and the median step times of both are printed; with 1 GPU (or VCCL_TORCH_SHARE_GPU=1) both
# ranks share GPU 0 on vccl only (NCCL refuses that). Exits 77 without torch or a GPU. PYTHON picks python.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
top=$(cd "$here/../.." && pwd)
build=${1:-${top_builddir:-$top/build}}
py=${PYTHON:-python3}
steps=${VCCL_TORCH_STEPS:-10}
nccl_dir=${VCCL_NCCL_DIR:-$build/src/nccl_compat/.libs}

if ! "$py" -c 'import torch' >/dev/null 2>&1; then
    echo "SKIP: torch is not installed for $py"
    exit 77
fi
ngpu=$("$py" -c 'import torch; print(torch.cuda.device_count() if torch.cuda.is_available() else 0)' 2>/dev/null || echo 0)
case $ngpu in '' | *[!0-9]*) ngpu=0 ;; esac
[ "$ngpu" -ge 1 ] || { echo "SKIP: needs a CUDA GPU, torch sees none"; exit 77; }
[ -e "$nccl_dir/libnccl.so.2" ] || { echo "FAIL: no libnccl.so.2 in $nccl_dir (build with CUDA, or set VCCL_NCCL_DIR)"; exit 1; }
share=""
if [ "$ngpu" -lt 2 ] || [ "${VCCL_TORCH_SHARE_GPU:-0}" = 1 ]; then share=--share-gpu; fi
out=$(mktemp -d "${TMPDIR:-/tmp}/vccl-megatron.XXXXXX")
trap 'rm -rf "$out"' EXIT

run() { # run NAME [ENV=VALUE...]: the test on 2 ranks through launch-megatron.sh
    local name=$1 expect=$nccl_dir
    shift
    [ "$name" = nccl ] && expect=""
    env "$@" VCCL_NCCL_DIR="$nccl_dir" timeout -k 10 600 mpirun --allow-run-as-root --oversubscribe --bind-to none \
        --mca pml ob1 --mca btl self,vader -np 2 -x VCCL_NCCL_DIR -x VCCL_USE_NCCL -x NCCL_NVLS_ENABLE \
        "$top/contrib/megatron/launch-megatron.sh" "$py" "$here/megatron_tp_test.py" --steps "$steps" $share \
        ${expect:+--expect-lib "$(readlink -f "$nccl_dir/libnccl.so.2")"} --times "$out/$name.times" \
        >"$out/$name.log" 2>&1
    local rc=$?
    sed "s/^/[$name] /" "$out/$name.log"
    return $rc
}

echo "== vccl (launch-megatron.sh, VCCL_NCCL_DIR=$nccl_dir)${share:+, both ranks on GPU 0}"
run vccl VCCL_USE_NCCL=0 NCCL_NVLS_ENABLE=0
rc=$?
if [ -z "$share" ]; then
    echo "== the real NCCL (launch-megatron.sh with VCCL_USE_NCCL=1)"
    run nccl VCCL_USE_NCCL=1 NCCL_NVLS_ENABLE=0 || rc=1
fi
# Median step time per mode, steps 2.. (the first ones set up communicators).
for name in vccl nccl; do
    [ -s "$out/$name.times" ] || continue
    "$py" - "$out/$name.times" "$name" <<'PYEOF'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
for mode in ("tp", "tp+sp"):
    ms = [float(r[2]) for r in rows if r[0] == mode and int(r[1]) >= 2]
    if ms:
        print(f"{sys.argv[2]}: {mode} median step {statistics.median(ms):.3f} ms over {len(ms)} steps")
PYEOF
done
[ $rc -eq 0 ] && echo "PASS" || echo "FAIL (logs above)"
exit $rc
