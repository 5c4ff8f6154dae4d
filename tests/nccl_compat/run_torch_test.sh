#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# run_torch_test.sh - torch_test.py (2 ranks) with libvccl-nccl preloaded, checked against a second run;
# compares the DDP losses (relative tolerance VCCL_TORCH_RTOL, default 1e-4). Two modes:
#   2 GPUs (torch sees at least 2 and VCCL_TORCH_SHARE_GPU is not 1): the vccl run on GPUs 0 and 1, then
#     the same test with the NCCL that torch brings; prints the median step times of both.
#   1 GPU (torch sees exactly 1, or VCCL_TORCH_SHARE_GPU=1): the vccl run with --share-gpu (both ranks on
#     GPU 0; NCCL itself refuses that, "Duplicate GPU detected"), compared against torch_test.py
#     --reference: one plain python process, no torch.distributed, that computes what the 2-rank DDP loop
#     must produce (same init and data, gradients averaged over the two shards). The reference differs
#     from DDP only in the order of float additions. Only vccl's median step time is meaningful there.
# Exits 77 (skip) without torch or without any CUDA GPU.
#
#   tests/nccl_compat/run_torch_test.sh [BUILD_DIR]     (default BUILD_DIR: ./build, or $top_builddir)
#
# How torch is made to use vccl: PyTorch wheels link libnccl.so.2 from the nvidia-nccl-cu* package through
# their RPATH, which LD_LIBRARY_PATH cannot override. LD_PRELOAD of our library (SONAME libnccl.so.2)
# loads it first; the dynamic linker then treats libtorch's DT_NEEDED libnccl.so.2 as satisfied by the
# already loaded object of that SONAME and binds every nccl* symbol to it. (Assumption: torch links NCCL
# dynamically, as the pip wheels since 2.x and most source builds do; a torch with NCCL linked statically
# cannot be redirected. torch_test.py checks which library is mapped and fails if it is not ours.)
# Launcher of the 2-rank runs: torchrun if found (VCCL_TORCH_LAUNCHER=mpirun to use mpirun -np 2), in
# both modes; the reference needs none. PYTHON picks the python. VCCL_TORCH_STEPS: DDP steps (20).
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
build=${1:-${top_builddir:-$here/../../build}}
lib=${VCCL_NCCL_LIB:-$build/src/nccl_compat/libvccl-nccl.so.2}
py=${PYTHON:-python3}
rtol=${VCCL_TORCH_RTOL:-1e-4}
steps=${VCCL_TORCH_STEPS:-20}

if ! "$py" -c 'import torch' >/dev/null 2>&1; then
    echo "SKIP: torch is not installed for $py (pip install torch)"
    exit 77
fi
ngpu=$("$py" -c 'import torch; print(torch.cuda.device_count() if torch.cuda.is_available() else 0)' 2>/dev/null || echo 0)
case $ngpu in '' | *[!0-9]*) ngpu=0 ;; esac
if [ "$ngpu" -lt 1 ]; then
    echo "SKIP: needs a CUDA GPU (2 to compare against NCCL), torch sees none"
    exit 77
fi
if [ "$ngpu" -lt 2 ] || [ "${VCCL_TORCH_SHARE_GPU:-0}" = 1 ]; then
    mode=share # both vccl ranks on GPU 0, compared against the single-process reference
    ref=reference
    share=--share-gpu
else
    mode=pair # vccl on GPUs 0 and 1, compared against torch's NCCL on the same two GPUs
    ref=nccl
    share=""
fi
if [ ! -e "$lib" ]; then
    echo "FAIL: $lib not found (build vccl with CUDA first, or set VCCL_NCCL_LIB)"
    exit 1
fi
lib=$(readlink -f "$lib")
out=$(mktemp -d "${TMPDIR:-/tmp}/vccl-torch.XXXXXX")
trap 'rm -rf "$out"' EXIT

launch() { # launch NAME [env assignments...]: torch_test.py on 2 ranks ($share: --share-gpu or empty)
    local name=$1
    shift
    local log=$out/$name.log
    if [ "${VCCL_TORCH_LAUNCHER:-torchrun}" = torchrun ] && "$py" -m torch.distributed.run --help >/dev/null 2>&1; then
        env "$@" "$py" -m torch.distributed.run --standalone --nproc-per-node 2 \
            "$here/torch_test.py" --steps "$steps" --losses "$out/$name.losses" ${expect:+--expect-lib "$expect"} \
            $share >"$log" 2>&1
    else
        mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2 -x MASTER_ADDR=127.0.0.1 -x MASTER_PORT=29517 \
            env "$@" "$py" "$here/torch_test.py" --steps "$steps" --losses "$out/$name.losses" \
            ${expect:+--expect-lib "$expect"} $share >"$log" 2>&1
    fi
    local rc=$?
    sed "s/^/[$name] /" "$log"
    return $rc
}

reference() { # reference NAME: torch_test.py --reference in one plain python process (no launcher)
    local name=$1
    local log=$out/$name.log
    "$py" "$here/torch_test.py" --reference --world 2 --steps "$steps" --losses "$out/$name.losses" >"$log" 2>&1
    local rc=$?
    sed "s/^/[$name] /" "$log"
    return $rc
}

if [ "$mode" = share ]; then
    why="torch sees $ngpu GPU(s)"
    [ "${VCCL_TORCH_SHARE_GPU:-0}" = 1 ] && why="$why, VCCL_TORCH_SHARE_GPU=1"
    echo "== one-GPU mode ($why): both ranks on GPU 0, checked against a single-process reference"
    echo "== vccl, 2 ranks sharing GPU 0: LD_PRELOAD=$lib"
else
    echo "== vccl: LD_PRELOAD=$lib"
fi
expect=$lib
launch vccl LD_PRELOAD="$lib${LD_PRELOAD:+:$LD_PRELOAD}"
rc_vccl=$?
if [ "$mode" = share ]; then
    echo "== reference: torch_test.py --reference (one process, no torch.distributed)"
    reference "$ref"
    rc_ref=$?
else
    echo "== real NCCL (torch's own)"
    expect=""
    launch nccl NCCL_DEBUG=WARN
    rc_ref=$?
fi

if [ $rc_vccl -ne 0 ] || [ $rc_ref -ne 0 ]; then
    if [ "$mode" = share ]; then
        echo "FAIL: vccl run exit $rc_vccl, reference run exit $rc_ref (logs above)"
    else
        echo "FAIL: vccl run exit $rc_vccl, NCCL run exit $rc_ref (logs above)"
    fi
    exit 1
fi
"$py" - "$out/vccl.losses" "$out/$ref.losses" "$rtol" "$ref" <<'PYEOF'
import statistics, sys
def read(p):
    rows = [l.split() for l in open(p) if l.strip()]
    return [float(r[1]) for r in rows], [float(r[2]) for r in rows]
lv, tv = read(sys.argv[1]); ln, tn = read(sys.argv[2]); rtol = float(sys.argv[3]); ref = sys.argv[4]
# Step times are comparable only against NCCL on the same two GPUs; the reference is one process doing
# both shards while the vccl ranks share one GPU, so only vccl's own times are shown then.
times = ref == "nccl"
w = max(12, len("loss " + ref) + 1)
bad = 0
print(f"{'step':>4} {'loss vccl':>12} {'loss ' + ref:>{w}} {'rel diff':>10} {'ms vccl':>9}" +
      (f" {'ms ' + ref:>9}" if times else ""))
for i, (a, b) in enumerate(zip(lv, ln)):
    rel = abs(a - b) / max(abs(b), 1e-12)
    bad += rel > rtol
    print(f"{i:4d} {a:12.6f} {b:{w}.6f} {rel:10.2e} {tv[i]:9.3f}" + (f" {tn[i]:9.3f}" if times else "") +
          ("  <-- differs" if rel > rtol else ""))
if len(lv) != len(ln) or not lv:
    print("FAIL: loss files differ in length or are empty"); sys.exit(1)
# the first steps include warm-up (communicator setup, autotuning): medians skip them
skip = min(3, len(tv) - 1)
if times:
    print(f"median step time (steps {skip}..): vccl {statistics.median(tv[skip:]):.3f} ms, "
          f"{ref} {statistics.median(tn[skip:]):.3f} ms")
else:
    print(f"median step time (steps {skip}..): vccl {statistics.median(tv[skip:]):.3f} ms "
          f"(2 ranks sharing one GPU; not comparable with the {ref}, which is one process)")
print(f"PASS: losses agree with {ref} within rtol %g" % rtol if not bad else
      f"FAIL: %d step(s) differ from {ref} beyond rtol %g" % (bad, rtol))
sys.exit(1 if bad else 0)
PYEOF
