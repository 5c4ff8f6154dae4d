#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Soak run: vccl-perf --soak on local ranks, host memory. Every collective with random sizes
# (0, 1, odd, up to -e), datatypes, ops and roots, every result checked, communicators split and destroyed
# periodically; prints operations, wrong elements, errors and per-rank VmRSS / open-descriptor growth.
#
# Usage: contrib/soak.sh [--minutes M | --seconds S] [--np N] [--perf PATH] [-- VCCL_PERF_OPTIONS...]
#   --minutes M   duration (default 1); --seconds S for short runs (the test suite's smoke run uses 20)
#   --np N        ranks (default 4)
#   --perf PATH   vccl-perf to run (default: $VCCL_PERF, else build/vccl-perf next to this script)
#   after --       passed to vccl-perf, e.g. --seed 42 -e 4M --max-rss-growth 8192 --split-every 16
# Exit status: vccl-perf's (0 pass, 1 wrong elements, 3 errors, 4 growth above a limit), 124 when the
# whole run overstayed its hard limit (duration + 120 s).
set -euo pipefail

seconds=60
np=4
here=$(cd "$(dirname "$0")" && pwd)
perf=${VCCL_PERF:-$here/../build/vccl-perf}
while [ $# -gt 0 ]; do
    case "$1" in
    --minutes) seconds=$(awk -v m="$2" 'BEGIN { printf "%d", m * 60 }'); shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    --np) np=$2; shift 2 ;;
    --perf) perf=$2; shift 2 ;;
    --) shift; break ;;
    -h|--help) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "soak.sh: unknown option $1 (try --help)" >&2; exit 2 ;;
    esac
done
[ -x "$perf" ] || { echo "soak.sh: $perf is not executable (build vccl-perf, or pass --perf)" >&2; exit 2; }
[ "$seconds" -gt 0 ] 2>/dev/null || { echo "soak.sh: the duration must be a positive number of seconds" >&2; exit 2; }

# A rank stuck on a peer should become an error within a minute, not sit out the 10-minute default.
export VCCL_OP_TIMEOUT_MS=${VCCL_OP_TIMEOUT_MS:-60000}
progress=$((seconds >= 600 ? 60 : seconds >= 60 ? 30 : 0))
cmd=(mpirun --allow-run-as-root --oversubscribe --bind-to none --mca pml ob1 --mca btl self,vader -np "$np"
     -x VCCL_OP_TIMEOUT_MS "$perf" --soak "$seconds" --progress "$progress" "$@")
echo "# ${cmd[*]}"
start=$(date +%s)
rc=0
timeout -k 10 $((seconds + 120)) "${cmd[@]}" || rc=$?
echo "# soak.sh: exit $rc after $(($(date +%s) - start)) s"
exit $rc
