#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Listed in tests/mpi/Makefile.inc: vccl-perf -o premulsum on 2 ranks, host memory, against the MPI baseline:
# AllReduce, Reduce and ReduceScatter run with a PreMulSum op of scalar 1, every size verified (-c 1: 0 wrong
# elements), and the header names the op (a scalar of 1 gives sum's results: tests/mpi/test_premul.cc checks the
# scalars themselves); --soak refuses the op.
perf=${top_builddir:-.}/vccl-perf
[ -x "$perf" ] || { echo "np2_perf_premul.sh: $perf not built" >&2; exit 99; }
tmp=$(mktemp -d) || exit 99
trap 'rm -rf "$tmp"' EXIT
fail=0
for coll in allreduce reduce reducescatter; do
    out=$tmp/$coll.txt
    if ! timeout 120 mpirun --allow-run-as-root --oversubscribe --bind-to none --mca pml ob1 --mca btl self,vader \
            -np 2 "$perf" -b 8 -e 256K -f 16 -n 20 -w 2 -c 1 -d bfloat16 -o premulsum --baseline mpi "$coll" > "$out" 2>&1; then
        echo "FAIL: vccl-perf -o premulsum $coll exited with an error:"; cat "$out"; fail=1; continue
    fi
    rows=$(grep -cE '^ +[0-9]+ ' "$out")
    wrong=$(awk '/^ +[0-9]+ / { if ($9 != 0 || $13 != 0) print }' "$out")
    if ! grep -q "op premulsum" "$out"; then
        echo "FAIL: $coll: the header does not name premulsum:"; grep "^# datatype" "$out"; fail=1
    elif [ "$rows" -ne 4 ] || [ -n "$wrong" ] || ! grep -q "Out of bounds values : 0 OK" "$out"; then
        echo "FAIL: $coll: $rows sizes (want 4), rows with wrong elements: $wrong"; cat "$out"; fail=1
    else
        echo "ok: $coll with a PreMulSum op: 4 sizes verified"
    fi
done
# --soak draws its own operations at random and checks each against its reference: premulsum is refused.
out=$(timeout 60 "$perf" --soak 5 -o premulsum 2>&1)
rc=$?
if [ $rc -eq 2 ] && printf '%s\n' "$out" | grep -qF -- "--soak: draws its own operations"; then
    echo "ok: --soak refuses -o premulsum"
else
    echo "FAIL: --soak -o premulsum: exit $rc, output: $out"; fail=1
fi
exit $fail
