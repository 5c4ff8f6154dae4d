#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# What flow telemetry costs: the same collective on two communicators of one job, one with telemetry on and
# one with it off (vccl-perf --baseline telemetry-off: same buffers, same run, timed one after the other),
# repeated RUNS times; prints per size the median and the range of time(on) / time(off).
#
#   contrib/bench-telemetry.sh [--build DIR] [--np N] [--runs R] [--coll C] [--no-control] [--paused]
#                              [--keep DIR] [--interval DRAWS] [--scrape SECONDS] [-- VCCL_PERF_OPTIONS...]
#
# --scrape SECONDS: vccl-telemetry serve runs beside the jobs and /metrics is fetched every SECONDS, as a
# Prometheus would (the "with serve scraping" figures); the scrapes' count and median time are printed.
#
# --paused: the baseline is the same communicator with its telemetry recording paused (vccl-perf
# --baseline telemetry-paused) instead of a second communicator: no difference between two communicators'
# endpoints and buffers enters the ratio. Its control jobs time the same communicator against itself,
# unchanged (vccl-perf --baseline self, an A/A run): what the alternating rounds show with no difference at all.
#
# Each run times telemetry on and off in alternating rounds (vccl-perf(1), --baseline telemetry-off).
# Control: after each such job the same job runs with telemetry off on both communicators
# (VCCL_TELEMETRY=0; vccl-perf's header says "telemetry OFF"). Its ratio is what the pairing itself shows
# without any telemetry, so "on - control" separates the cost of telemetry from a bias of the pairing.
# --no-control skips those jobs (half the time). --keep DIR keeps every job's JSON output there
# (DIR/on/runR.json, DIR/control/runR.json) for other statistics. --interval DRAWS adds, per size, a 90%
# bootstrap interval of "on - control" (the difference of the two sets' median ratios; DRAWS resamples of
# the jobs of each set with replacement, seeded, so a rerun on the same files gives the same interval).
# MPIRUN replaces the launcher, e.g. with --bind-to core --map-by core to bind the ranks.
# Defaults: build/, 2 ranks, 5 runs, allreduce, -b 8 -e 64M -f 8 -n 200 -w 20 -c 1 on host memory (add
# "-- -m cuda ..." on a GPU machine). A ratio of 1.01 means the first communicator's operation took 1% longer;
# below 1 is noise in the other direction. docs/PERFORMANCE.md ("Telemetry cost") has the figures.
set -u
src=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$src/build}
np=2
runs=5
coll=allreduce
control=1
baseline=telemetry-off
keep=
draws=0
scrape=
while [ $# -gt 0 ]; do
    case $1 in
        --build) build=$2; shift ;;
        --np) np=$2; shift ;;
        --runs) runs=$2; shift ;;
        --coll) coll=$2; shift ;;
        --no-control) control=0 ;;
        --paused) baseline=telemetry-paused ;;
        --keep) keep=$2; shift ;;
        --interval) draws=$2; shift ;;
        --scrape) scrape=$2; shift ;;
        --) shift; break ;;
        *) echo "usage: $0 [--build DIR] [--np N] [--runs R] [--coll C] [--no-control] [--paused] [--keep DIR] [--interval DRAWS] [--scrape SECONDS] [-- VCCL_PERF_OPTIONS...]" >&2
           exit 2 ;;
    esac
    shift
done
perf_opts=("$@")
[ ${#perf_opts[@]} -gt 0 ] || perf_opts=(-b 8 -e 64M -f 8 -n 200 -w 20 -c 1)
perf=$build/vccl-perf
[ -x "$perf" ] || { echo "bench-telemetry.sh: $perf not built" >&2; exit 2; }
: "${MPIRUN:=mpirun --allow-run-as-root --oversubscribe --bind-to none --mca pml ob1 --mca btl self,vader}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/on" "$tmp/control"
# set: on (telemetry chosen per communicator by vcclConfig_t, so VCCL_TELEMETRY must not force it either
# way) or control (VCCL_TELEMETRY=0 turns the first communicator's off too).
# With --paused the control keeps telemetry on and runs --baseline self instead.
run_job() {
    local set=$1 r=$2
    local env_opt=(-u VCCL_TELEMETRY) fwd=() b=$baseline
    if [ "$set" = control ] && [ "$baseline" = telemetry-paused ]; then
        b=self
    elif [ "$set" = control ]; then
        env_opt=(VCCL_TELEMETRY=0) && fwd=(-x VCCL_TELEMETRY)
    fi
    # The JSON output has the times to the nanosecond (the table rounds to 10 ns, 2% of an 8-byte allreduce).
    env "${env_opt[@]}" $MPIRUN -np "$np" "${fwd[@]}" "$perf" "${perf_opts[@]}" --baseline "$b" \
        -J "$tmp/$set/run$r.json" "$coll" >"$tmp/$set/run$r.txt" 2>&1 ||
        { cat "$tmp/$set/run$r.txt"; echo "bench-telemetry.sh: $set run $r failed" >&2; exit 1; }
}
scraper_pids=()
if [ -n "$scrape" ]; then
    "$build/vccl-telemetry" serve --listen 127.0.0.1:0 > "$tmp/serve.out" 2>&1 &
    scraper_pids+=("$!")
    for _ in $(seq 50); do grep -q "listening on" "$tmp/serve.out" && break; sleep 0.1; done
    sport=$(sed -n 's/.*listening on 127\.0\.0\.1:\([0-9]*\),.*/\1/p' "$tmp/serve.out")
    [ -n "$sport" ] || { cat "$tmp/serve.out"; echo "bench-telemetry.sh: vccl-telemetry serve did not start" >&2; exit 1; }
    python3 - "$sport" "$scrape" > "$tmp/scrapes.txt" <<'PY' &
import sys, time, urllib.request
port, every = sys.argv[1], float(sys.argv[2])
while True:
    t0 = time.monotonic()
    try:
        n = len(urllib.request.urlopen("http://127.0.0.1:%s/metrics" % port, timeout=10).read())
        print("%.3f %d" % ((time.monotonic() - t0) * 1e3, n), flush=True)
    except Exception as e:
        print("error %s" % e, flush=True)
    time.sleep(max(0.0, every - (time.monotonic() - t0)))
PY
    scraper_pids+=("$!")
    trap 'kill "${scraper_pids[@]}" 2>/dev/null; rm -rf "$tmp"' EXIT
fi
for r in $(seq "$runs"); do
    run_job on "$r"
    [ "$control" = 1 ] && run_job control "$r"
done
if [ -n "$scrape" ]; then
    kill "${scraper_pids[@]}" 2>/dev/null
    scrape_note=$(grep -v '^error' "$tmp/scrapes.txt" | sort -n -k1,1 | awk -v every="$scrape" -v errors="$(grep -c '^error' "$tmp/scrapes.txt")" '
        { n++; t[n] = $1; b += $2 }
        END { printf "%d scrapes of /metrics every %s s, median %.1f ms, %d bytes on average, %d errors", n, every,
              n ? t[int((n + 1) / 2)] : 0, n ? b / n : 0, errors }')
fi

# Per size of one set: "size median min max wrong on_us off_us" (times of the run with the median ratio).
# One JSON line per size: {"size": S, ..., "out_of_place": {"time_us": T, ..., "wrong": W}, "in_place": {...},
# "telemetry-off": {"time_us": T, ...}}; out_of_place and telemetry-off are the paired medians (vccl-perf(1)).
# Per job and size of one set: "size on off on/off wrong".
per_job() { # $1: a set's folder, $2: the baseline its jobs ran
    cat "$1"/run*.json | awk -v key="\"$2\": {\"time_us\": " 'index($0, "\"size\":") && index($0, key) {
            size = $0; sub(/.*"size": /, "", size); sub(/,.*/, "", size)
            on = $0; sub(/.*"out_of_place": \{"time_us": /, "", on); sub(/,.*/, "", on)
            off = substr($0, index($0, key) + length(key)); sub(/,.*/, "", off)
            w = $0; sub(/.*"out_of_place": \{[^}]*"wrong": /, "", w); sub(/[,}].*/, "", w)
            if (off + 0 > 0) print size, on, off, on / off, w + 0
        }'
}
summarise() { # $1: a set's folder, $2: the baseline its jobs ran
    per_job "$1" "$2" | sort -n -k1,1 -k4,4 | awk '
        function flush(   mid) {
            if (n == 0) return
            mid = int((n + 1) / 2)
            printf "%s %.3f %.3f %.3f %d %.3f %.3f\n", size, ratio[mid], ratio[1], ratio[n], wrong, on[mid], off[mid]
            n = 0; wrong = 0
        }
        $1 != size { flush(); size = $1 }
        { n++; ratio[n] = $4; on[n] = $2; off[n] = $3; wrong += $5 }
        END { flush() }'
}
if [ -n "$keep" ]; then mkdir -p "$keep" && cp -r "$tmp/on" "$tmp/control" "$keep/"; fi
control_baseline=$baseline
[ "$baseline" = telemetry-paused ] && control_baseline=self
summarise "$tmp/on" "$baseline" > "$tmp/on.txt"
if [ "$control" = 1 ]; then summarise "$tmp/control" "$control_baseline" > "$tmp/control.txt"; else : > "$tmp/control.txt"; fi
control_what="a control run with telemetry off on both communicators"
[ "$baseline" = telemetry-paused ] && control_what="a control run timing the communicator against itself (--baseline self)"

echo "Telemetry cost: $coll on $np ranks, $runs runs of \`vccl-perf ${perf_opts[*]} --baseline $baseline $coll\`$([ "$control" = 1 ] && echo ", each followed by $control_what")"
echo "(commit $(git -C "$src" rev-parse --short HEAD 2>/dev/null || echo unknown), $(date -u +%Y-%m-%d), $(uname -n), $(nproc) cores)"
[ -n "$scrape" ] && echo "(vccl-telemetry serve beside the jobs: $scrape_note)"
echo
# Per size "size lo hi": the 5th and 95th percentile over DRAWS resamples of median(on) - median(control),
# each median the lower one of a resample (as summarise takes it) of that set's per-job ratios.
: > "$tmp/interval.txt"
if [ "$draws" -gt 0 ] 2>/dev/null && [ "$control" = 1 ]; then
    { per_job "$tmp/control" "$control_baseline" | awk '{ print "c", $1, $4 }'
      per_job "$tmp/on" "$baseline" | awk '{ print "o", $1, $4 }'; } | sort -k2,2n -k1,1 -k3,3g | awk -v draws="$draws" '
        # Lower median of a resample (with replacement) of v[1..n], sorted ascending: the k-th smallest
        # drawn index, found by counting, is the k-th smallest drawn value.
        function resample_median(v, n,   cnt, i, k, seen) {
            split("", cnt)
            for (i = 1; i <= n; i++) cnt[int(rand() * n) + 1]++
            k = int((n + 1) / 2); seen = 0
            for (i = 1; i <= n; i++) { seen += cnt[i]; if (seen >= k) return v[i] }
            return v[n]
        }
        function qsort(a, lo, hi,   i, last, t) {
            if (lo >= hi) return
            t = a[lo]; a[lo] = a[int((lo + hi) / 2)]; a[int((lo + hi) / 2)] = t
            last = lo
            for (i = lo + 1; i <= hi; i++) if (a[i] < a[lo]) { last++; t = a[last]; a[last] = a[i]; a[i] = t }
            t = a[lo]; a[lo] = a[last]; a[last] = t
            qsort(a, lo, last - 1); qsort(a, last + 1, hi)
        }
        function flush(   d, i) {
            if (nc == 0 || no == 0) return
            for (i = 1; i <= draws; i++) d[i] = resample_median(on, no) - resample_median(ctl, nc)
            qsort(d, 1, draws)
            printf "%s %+.4f %+.4f\n", size, d[int(draws * 0.05) + 1], d[int(draws * 0.95)]
        }
        BEGIN { srand(1) }
        $2 != size { flush(); size = $2; nc = 0; no = 0; split("", on); split("", ctl) }
        $1 == "c" { ctl[++nc] = $3 }
        $1 == "o" { on[++no] = $3 }
        END { flush() }' > "$tmp/interval.txt"
fi
echo "| bytes | time on (us) | time off (us) | on/off median | on/off min - max | control median | control min - max | on - control | 90% interval | #wrong |"
echo "|---|---|---|---|---|---|---|---|---|---|"
awk 'FILENAME == ARGV[1] { ci[$1] = sprintf("%+.3f .. %+.3f", $2, $3); next }
     FILENAME == ARGV[2] { c[$1] = $0; next }
     {
         ctl = "- | - | -"
         if ($1 in c) { split(c[$1], x, " "); ctl = sprintf("%.3f | %.3f - %.3f | %+.3f", x[2], x[3], x[4], $2 - x[2]); $5 += x[5] }
         iv = ($1 in ci) ? ci[$1] : "-"
         printf "| %s | %.3f | %.3f | %.3f | %.3f - %.3f | %s | %s | %d |\n", $1, $6, $7, $2, $3, $4, ctl, iv, $5
     }' "$tmp/interval.txt" "$tmp/control.txt" "$tmp/on.txt"
echo
echo "(time on and off: the run with the median on/off ratio; #wrong counts every run, control included)"
if [ "$draws" -gt 0 ] 2>/dev/null && [ "$control" = 1 ]; then
    echo "(90% interval: bootstrap of on - control over $draws resamples of the jobs of each set)"
fi
