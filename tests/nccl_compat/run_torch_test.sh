#!/usr/bin/env bash
# run_torch_test.sh - torch_test.py on 2 GPUs twice: with libvccl-nccl preloaded, then with the NCCL that
# torch brings; compares the DDP losses (relative tolerance VCCL_TORCH_RTOL, default 1e-4) and prints the
# median step times of both. Exits 77 (skip) without torch or 2 GPUs.
#
#   tests/nccl_compat/run_torch_test.sh [BUILD_DIR]     (default BUILD_DIR: ./build, or $top_builddir)
#
# How torch is made to use vccl: PyTorch wheels link libnccl.so.2 from the nvidia-nccl-cu* package through
# their RPATH, which LD_LIBRARY_PATH cannot override. LD_PRELOAD of our library (SONAME libnccl.so.2)
# loads it first; the dynamic linker then treats libtorch's DT_NEEDED libnccl.so.2 as satisfied by the
# already loaded object of that SONAME and binds every nccl* symbol to it. (Assumption: torch links NCCL
# dynamically, as the pip wheels since 2.x and most source builds do; a torch with NCCL linked statically
# cannot be redirected. torch_test.py checks which library is mapped and fails if it is not ours.)
# Launcher: torchrun if found (VCCL_TORCH_LAUNCHER=mpirun to use mpirun -np 2). PYTHON picks the python.
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
if [ "${ngpu:-0}" -lt 2 ]; then
    echo "SKIP: needs 2 CUDA GPUs, torch sees ${ngpu:-0}"
    exit 77
fi
if [ ! -e "$lib" ]; then
    echo "FAIL: $lib not found (build vccl with CUDA first, or set VCCL_NCCL_LIB)"
    exit 1
fi
lib=$(readlink -f "$lib")
out=$(mktemp -d "${TMPDIR:-/tmp}/vccl-torch.XXXXXX")
trap 'rm -rf "$out"' EXIT

launch() { # launch NAME [env assignments...]
    local name=$1
    shift
    local log=$out/$name.log
    if [ "${VCCL_TORCH_LAUNCHER:-torchrun}" = torchrun ] && "$py" -m torch.distributed.run --help >/dev/null 2>&1; then
        env "$@" "$py" -m torch.distributed.run --standalone --nproc-per-node 2 \
            "$here/torch_test.py" --steps "$steps" --losses "$out/$name.losses" ${expect:+--expect-lib "$expect"} \
            >"$log" 2>&1
    else
        mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2 -x MASTER_ADDR=127.0.0.1 -x MASTER_PORT=29517 \
            env "$@" "$py" "$here/torch_test.py" --steps "$steps" --losses "$out/$name.losses" \
            ${expect:+--expect-lib "$expect"} >"$log" 2>&1
    fi
    local rc=$?
    sed "s/^/[$name] /" "$log"
    return $rc
}

echo "== vccl: LD_PRELOAD=$lib"
expect=$lib
launch vccl LD_PRELOAD="$lib${LD_PRELOAD:+:$LD_PRELOAD}"
rc_vccl=$?
echo "== real NCCL (torch's own)"
expect=""
launch nccl NCCL_DEBUG=WARN
rc_nccl=$?

if [ $rc_vccl -ne 0 ] || [ $rc_nccl -ne 0 ]; then
    echo "FAIL: vccl run exit $rc_vccl, NCCL run exit $rc_nccl (logs above)"
    exit 1
fi
"$py" - "$out/vccl.losses" "$out/nccl.losses" "$rtol" <<'PYEOF'
import statistics, sys
def read(p):
    rows = [l.split() for l in open(p) if l.strip()]
    return [float(r[1]) for r in rows], [float(r[2]) for r in rows]
lv, tv = read(sys.argv[1]); ln, tn = read(sys.argv[2]); rtol = float(sys.argv[3])
bad = 0
print(f"{'step':>4} {'loss vccl':>12} {'loss nccl':>12} {'rel diff':>10} {'ms vccl':>9} {'ms nccl':>9}")
for i, (a, b) in enumerate(zip(lv, ln)):
    rel = abs(a - b) / max(abs(b), 1e-12)
    bad += rel > rtol
    print(f"{i:4d} {a:12.6f} {b:12.6f} {rel:10.2e} {tv[i]:9.3f} {tn[i]:9.3f}{'  <-- differs' if rel > rtol else ''}")
# the first steps include warm-up (communicator setup, autotuning): medians skip them
skip = min(3, len(tv) - 1)
print(f"median step time (steps {skip}..): vccl {statistics.median(tv[skip:]):.3f} ms, "
      f"nccl {statistics.median(tn[skip:]):.3f} ms")
if len(lv) != len(ln) or not lv:
    print("FAIL: loss files differ in length"); sys.exit(1)
print("PASS: losses agree within rtol %g" % rtol if not bad else "FAIL: %d step(s) differ beyond rtol %g" % (bad, rtol))
sys.exit(1 if bad else 0)
PYEOF
