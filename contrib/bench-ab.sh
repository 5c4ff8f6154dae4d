#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Two builds of vccl on the same machine in one job, alternating: A, B, A, B, ... so that drift of the machine
# (clocks, other load) falls on both alike. Prints, per collective and size, the median time of each build over its
# rounds and the ratio B/A; a ratio within a few percent of 1 is noise on a quiet machine, and on one GPU shared by
# the ranks (time slices) a wider band is.
#
#   contrib/bench-ab.sh A_VCCL_PERF B_VCCL_PERF [NP] [ROUNDS] -- VCCL_PERF_OPTIONS... COLLECTIVE [COLLECTIVE...]
#
# e.g. contrib/bench-ab.sh old/vccl-perf new/vccl-perf 2 3 -- -m cuda -b 8 -e 64M -f 8 -n 20 -w 5 -c 1 allreduce sendrecv
# Each build's vccl-perf runs with its own libraries (the RPATH or LD_LIBRARY_PATH it was given); set A_ENV and
# B_ENV to "VAR=value ..." to give each build an environment of its own (e.g. LD_LIBRARY_PATH). VCCL_* variables
# in the environment reach the ranks of both. MPIRUN replaces the launcher.
set -euo pipefail
[ $# -ge 3 ] || { echo "usage: $0 A_VCCL_PERF B_VCCL_PERF [NP] [ROUNDS] -- OPTIONS... COLLECTIVE..." >&2; exit 2; }
a=$1 b=$2
shift 2
np=2 rounds=3
if [ $# -gt 0 ] && [ "$1" != -- ]; then np=$1; shift; fi
if [ $# -gt 0 ] && [ "$1" != -- ]; then rounds=$1; shift; fi
[ "${1:-}" = -- ] || { echo "bench-ab.sh: expected -- before the vccl-perf options" >&2; exit 2; }
shift
opts=() colls=()
for x in "$@"; do
  case $x in
    allreduce|broadcast|reduce|allgather|reducescatter|alltoall|sendrecv) colls+=("$x") ;;
    *) opts+=("$x") ;;
  esac
done
[ ${#colls[@]} -gt 0 ] || { echo "bench-ab.sh: no collective named" >&2; exit 2; }
for p in "$a" "$b"; do [ -x "$p" ] || { echo "bench-ab.sh: $p is not executable" >&2; exit 2; }; done
export NCCL_NVLS_ENABLE=0
: "${MPIRUN:=mpirun --allow-run-as-root --oversubscribe --bind-to none --mca pml ob1 --mca btl self,vader}"
fwd=(-x NCCL_NVLS_ENABLE)
for v in $(compgen -e); do
  case $v in VCCL_*|LD_LIBRARY_PATH) fwd+=(-x "$v") ;; esac
done
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
# One vccl-perf run: its data lines "size count type redop root time algbw busbw wrong ..." as "size time wrong".
one() { # one BUILD(a|b) PERF COLL ROUND
  local envs=${A_ENV:-}
  [ "$1" = b ] && envs=${B_ENV:-}
  env $envs $MPIRUN -np "$np" "${fwd[@]}" "$2" "${opts[@]}" "$3" 2>"$out/$1.$3.$4.err" |
    awk '$1 ~ /^[0-9]+$/ && NF >= 9 { print $1, $6, $9 }' >"$out/$1.$3.$4"
  [ -s "$out/$1.$3.$4" ] || { echo "bench-ab.sh: build $1, $3, round $4 printed no figures:" >&2; tail -5 "$out/$1.$3.$4.err" >&2; exit 1; }
}
for coll in "${colls[@]}"; do
  for r in $(seq 1 "$rounds"); do
    one a "$a" "$coll" "$r"
    one b "$b" "$coll" "$r"
  done
done
for coll in "${colls[@]}"; do
  echo "## $coll: median of $rounds rounds each, time in us (out of place); B/A"
  printf '%12s %12s %12s %8s %s\n' size A_us B_us B/A wrong
  for f in "$out"/a."$coll".*; do sed "s/^/a /" "$f"; done >"$out/all.$coll"
  for f in "$out"/b."$coll".*; do sed "s/^/b /" "$f"; done >>"$out/all.$coll"
  awk '
    { t[$1, $2] = t[$1, $2] " " $3; w[$2] += $4; sizes[$2] = 1 }
    function median(list,   n, v, i, j, x) {
      n = split(list, v, " ")
      for (i = 2; i <= n; i++) { x = v[i]; for (j = i - 1; j >= 1 && v[j] + 0 > x + 0; j--) v[j + 1] = v[j]; v[j + 1] = x }
      return n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
    }
    END {
      n = 0; for (s in sizes) order[++n] = s + 0
      for (i = 2; i <= n; i++) { x = order[i]; for (j = i - 1; j >= 1 && order[j] > x; j--) order[j + 1] = order[j]; order[j + 1] = x }
      for (i = 1; i <= n; i++) {
        s = order[i]; ma = median(t["a", s]); mb = median(t["b", s])
        r = 0; if (ma > 0) r = mb / ma
        printf "%12d %12.2f %12.2f %8.3f %d\n", s, ma, mb, r, w[s]
      }
    }' "$out/all.$coll"
done
