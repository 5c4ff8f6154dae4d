#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Runs fault tests (tests/fault/*.sh: two ranks in network namespaces joined by veth rails) many times each and
# prints a Markdown table of what users feel: passes, crashes and other failures, wrong elements, and the
# detection, stall and failback times (min / median / max over the runs; each run counts its worse rank).
#
#   contrib/bench-fault-sets.sh [--build DIR] [--runs N] [CASE...]
#
# CASE is a test's name without .sh (default: fault-link-down-up fault-blackhole fault-slow fault-flap
# fault-alternate fault-both-down). Every run is one fresh job; nothing is rerun. A crash is a run whose mpirun
# exit was a signal or whose log shows one (SIGSEGV, SIGABRT, an assertion). Needs root; a case that skips
# (exit 77) is shown as skipped. The logs of failed runs are kept and named below the table.
set -u
src=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$src/build}
runs=20
cases=()
while [ $# -gt 0 ]; do
    case $1 in
        --build) build=$2; shift ;;
        --runs) runs=$2; shift ;;
        -h|--help) sed -n '3,12p' "$0"; exit 0 ;;
        -*) echo "usage: $0 [--build DIR] [--runs N] [CASE...]" >&2; exit 2 ;;
        *) cases+=("$1") ;;
    esac
    shift
done
[ ${#cases[@]} -gt 0 ] || cases=(fault-link-down-up fault-blackhole fault-slow fault-flap fault-alternate fault-both-down)
case $runs in ''|*[!0-9]*) echo "bench-fault-sets.sh: --runs needs a number" >&2; exit 2 ;; esac
[ -x "$build/tests/fault/fault_worker" ] || {
    echo "bench-fault-sets.sh: build $build/tests/fault/fault_worker first (make -C $build tests/fault/fault_worker)" >&2
    exit 2
}
keep=$(mktemp -d "${TMPDIR:-/tmp}/bench-fault-sets.XXXXXX")
results=$keep/results.tsv
: >"$results"
for c in "${cases[@]}"; do
    script=$src/tests/fault/$c.sh
    [ -f "$script" ] || { echo "bench-fault-sets.sh: no $script" >&2; exit 2; }
    for i in $(seq 1 "$runs"); do
        log=$keep/$c.$i.log
        top_builddir=$build VF_WORKER=$build/tests/fault/fault_worker bash "$script" >"$log" 2>&1
        rc=$?
        printf '%s\t%s\t%s\n' "$c" "$rc" "$log" >>"$results"
        echo "bench-fault-sets.sh: $c run $i of $runs: exit $rc" >&2
    done
done
python3 - "$results" "$runs" <<'EOF'
import re, statistics, sys

results, runs = sys.argv[1], sys.argv[2]
line_re = re.compile(r"fault test: rank (\d+): (\d+) operations, (\d+) wrong elements, (\d+) bad checksums, (\d+) errors, "
                     r"longest stall ([-\d.]+) ms .*detection ([-\d.]+) ms, failback ([-\d.]+) ms")
crash_re = re.compile(r"SIGSEGV|SIGABRT|SIGBUS|Segmentation fault|Assertion .* failed|Caught signal|core dumped|"
                      r"exited on signal|terminate called")
order, cases = [], {}
for row in open(results):
    case, rc, log = row.rstrip("\n").split("\t")
    if case not in cases:
        order.append(case)
        cases[case] = {"runs": 0, "pass": 0, "skip": 0, "crash": 0, "fail": 0, "wrong": 0,
                       "detect": [], "stall": [], "failback": [], "failed_logs": []}
    s = cases[case]
    s["runs"] += 1
    text = open(log, errors="replace").read()
    ranks = [m.groups() for m in line_re.finditer(text)]
    if rc == "77":
        s["skip"] += 1
        continue
    if rc == "0":
        s["pass"] += 1
    elif crash_re.search(text) or (rc.isdigit() and int(rc) > 128):
        s["crash"] += 1
        s["failed_logs"].append(log)
    else:
        s["fail"] += 1
        s["failed_logs"].append(log)
    s["wrong"] += sum(int(r[2]) + int(r[3]) for r in ranks)
    for key, idx in (("stall", 5), ("detect", 6), ("failback", 7)):
        vals = [float(r[idx]) for r in ranks if float(r[idx]) >= 0]
        if vals:
            s[key].append(max(vals))

def spread(vals):
    if not vals:
        return "-"
    return "%.0f / %.0f / %.0f" % (min(vals), statistics.median(vals), max(vals))

print("| case | runs | pass | crash | other failure | skipped | wrong elements | detection ms | stall ms | failback ms |")
print("|---|---|---|---|---|---|---|---|---|---|")
for case in order:
    s = cases[case]
    print("| %s | %d | %d | %d | %d | %d | %d | %s | %s | %s |" % (
        case, s["runs"], s["pass"], s["crash"], s["fail"], s["skip"], s["wrong"], spread(s["detect"]),
        spread(s["stall"]), spread(s["failback"])))
print()
print("min / median / max over the runs, each run's worse rank; %s runs per case requested." % runs)
for case in order:
    for log in cases[case]["failed_logs"]:
        print("failed run: %s" % log)
EOF
echo "logs: $keep"
