#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Listed in tests/mpi/Makefile.inc: a real Prometheus (Debian's prometheus, started here on a free local port,
# stopped at the end) scrapes vccl-telemetry serve every second while telemetry_load runs 2 ranks of host-memory
# allreduces. Through Prometheus's HTTP API: the ranks' send bytes counters sum to the bytes moved (with two
# ranks every allreduce algorithm sends the whole vector once per call), the collective bytes to count x 4 x
# calls, the latency histogram is filled (+Inf bucket equal to _count, a p99 from histogram_quantile within the
# buckets). The server itself: promtool accepts its text, HEAD answers without a body, other methods get 405,
# 40 idle connections and a client that never finishes its request do not stop it, and it is still up at the end.
# Skipped (77) without prometheus or without libmicrohttpd in the build.
set -u
top=${top_builddir:-.}
tool=$top/vccl-telemetry
load=$top/tests/mpi/telemetry_load
[ -x "$tool" ] && [ -x "$load" ] || { echo "np2_prometheus.sh: $tool or $load not built" >&2; exit 99; }
prom=$(command -v prometheus) || { echo "SKIP: prometheus is not installed (Debian: apt-get install prometheus)"; exit 77; }
tmp=$(mktemp -d) || exit 99
pids=()
cleanup() {
    touch "$tmp/hold" 2>/dev/null
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
    for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done
    rm -rf "$tmp"
}
trap cleanup EXIT
fail=0
job=promtest$$
count=262144   # 1 MiB of floats
iters=20

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# serve on an ephemeral port (it prints the one it got), only this job's rings, short timeout for the slow client.
"$tool" serve --listen 127.0.0.1:0 --job "$job" --timeout 2 --max-connections 32 > "$tmp/serve.out" 2> "$tmp/serve.err" &
serve_pid=$!
pids+=("$serve_pid")
sport=""
for _ in $(seq 50); do
    sport=$(sed -n 's/.*listening on 127\.0\.0\.1:\([0-9]*\),.*/\1/p' "$tmp/serve.out")
    [ -n "$sport" ] && break
    if ! kill -0 "$serve_pid" 2>/dev/null; then
        wait "$serve_pid"; rc=$?
        if [ $rc -eq 3 ]; then echo "SKIP: $(cat "$tmp/serve.err")"; exit 77; fi
        echo "FAIL: serve exited with $rc: $(cat "$tmp/serve.err")"; exit 1
    fi
    sleep 0.1
done
[ -n "$sport" ] || { echo "FAIL: serve did not say where it listens"; cat "$tmp/serve.out" "$tmp/serve.err"; exit 1; }
echo "serve listens on 127.0.0.1:$sport"

pport=$(free_port)
cat > "$tmp/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
  scrape_timeout: 900ms
  evaluation_interval: 1s
scrape_configs:
  - job_name: vccl
    static_configs:
      - targets: ['127.0.0.1:$sport']
EOF
"$prom" --config.file="$tmp/prometheus.yml" --storage.tsdb.path="$tmp/tsdb" --web.listen-address="127.0.0.1:$pport" \
    > "$tmp/prometheus.log" 2>&1 &
pids+=("$!")

# q EXPR: the value of an instant query (the sum of all series), or "none".
q() {
    python3 - "$pport" "$1" <<'PY'
import json, sys, urllib.parse, urllib.request
port, expr = sys.argv[1], sys.argv[2]
url = "http://127.0.0.1:%s/api/v1/query?%s" % (port, urllib.parse.urlencode({"query": expr}))
try:
    data = json.load(urllib.request.urlopen(url, timeout=5))
    res = data["data"]["result"]
    print(sum(float(r["value"][1]) for r in res) if res else "none")
except Exception as e:
    print("none")
PY
}
ready=0
for _ in $(seq 300); do
    if python3 -c "import urllib.request,sys; urllib.request.urlopen('http://127.0.0.1:$pport/-/ready', timeout=1)" 2>/dev/null; then
        ready=1; break
    fi
    sleep 0.1
done
[ $ready = 1 ] || { echo "FAIL: prometheus did not get ready on port $pport"; tail -20 "$tmp/prometheus.log"; exit 1; }
echo "prometheus ready on 127.0.0.1:$pport"

VCCL_TELEMETRY_JOB=$job VCCL_TELEMETRY_SAMPLE=1 timeout 150 mpirun --allow-run-as-root --oversubscribe --bind-to none \
    --mca pml ob1 --mca btl self,vader -np 2 -x VCCL_TELEMETRY_JOB -x VCCL_TELEMETRY_SAMPLE \
    "$load" $count $iters "$tmp/hold" > "$tmp/load.out" 2>&1 &
load_pid=$!
pids+=("$load_pid")
for _ in $(seq 600); do
    grep -q "traffic done" "$tmp/load.out" && break
    kill -0 "$load_pid" 2>/dev/null || break
    sleep 0.1
done
grep -q "traffic done: .* 0 wrong" "$tmp/load.out" || { echo "FAIL: the job did not finish its traffic:"; cat "$tmp/load.out"; exit 1; }
cat "$tmp/load.out"

want=$((2 * iters * count * 4))
sel="vccl_job=\"$job\""
# wait_for NAME EXPR WANT: until the query gives WANT (numerically), at most 20 s.
wait_for() {
    local got=none
    for _ in $(seq 40); do
        got=$(q "$2")
        if [ "$got" != none ] && python3 -c "import sys; sys.exit(0 if abs(float('$got') - float('$3')) < 0.5 else 1)"; then
            echo "ok: $1 = $got"
            return 0
        fi
        sleep 0.5
    done
    echo "FAIL: $1 = $got, want $3 (query: $2)"
    fail=1
    return 1
}
wait_for "bytes sent by both ranks" "sum(vccl_path_bytes_total{$sel,dir=\"send\"})" $want
wait_for "bytes received by both ranks" "sum(vccl_path_bytes_total{$sel,dir=\"recv\"})" $want
wait_for "allreduce calls" "sum(vccl_coll_calls_total{$sel,coll=\"allreduce\"})" $((2 * iters))
wait_for "allreduce bytes" "sum(vccl_coll_bytes_total{$sel,coll=\"allreduce\"})" $want
wait_for "rings scraped" "vccl_scrape_rings" 2
# Role and rail come from vccl_path_info (three per ring); the join loses no path's bytes.
wait_for "path info series" "count(vccl_path_info{$sel})" 6
wait_for "bytes sent, joined with role and rail" \
    "sum(vccl_path_bytes_total{$sel,dir=\"send\"} * on (vccl_job, comm, rank, path) group_left (rail, role) vccl_path_info)" $want
samples=$(q "sum(vccl_path_send_latency_seconds_count{$sel})")
inf=$(q "sum(vccl_path_send_latency_seconds_bucket{$sel,le=\"+Inf\"})")
p99=$(q "histogram_quantile(0.99, sum by (le) (vccl_path_send_latency_seconds_bucket{$sel}))")
echo "latency: $samples timed sends, +Inf bucket $inf, p99 $p99 s"
if [ "$samples" = none ] || [ "$samples" != "$inf" ] || \
   ! python3 -c "import sys; s=float('$samples'); p=float('$p99'); sys.exit(0 if s >= $iters and 0 < p < 10 else 1)"; then
    echo "FAIL: latency histogram not filled as it should be"; fail=1
fi
# Every query of the Grafana dashboard parses and evaluates on this Prometheus (the job variable as "all").
dash=${top_srcdir:-$(dirname "$0")/../..}/contrib/grafana/vccl-fabric.json
if [ -f "$dash" ]; then
    python3 - "$pport" "$dash" <<'PY' || fail=1
import json, sys, urllib.error, urllib.parse, urllib.request
port, path = sys.argv[1], sys.argv[2]
bad = 0
n = 0
for panel in json.load(open(path))["panels"]:
    for t in panel.get("targets", []):
        expr = t["expr"].replace("$job", ".*")
        n += 1
        url = "http://127.0.0.1:%s/api/v1/query?%s" % (port, urllib.parse.urlencode({"query": expr}))
        try:
            status = json.load(urllib.request.urlopen(url, timeout=5))["status"]
        except urllib.error.HTTPError as e:
            status = "error %d: %s" % (e.code, e.read()[:200])
        if status != "success":
            print("FAIL: dashboard panel %r: %s: %s" % (panel["title"], expr, status))
            bad = 1
if not bad:
    print("ok: the dashboard's %d queries evaluate" % n)
sys.exit(bad)
PY
fi
up=$(q "up{job=\"vccl\"}")
[ "$up" = 1.0 ] || { echo "FAIL: prometheus sees the target as up=$up"; fail=1; }

# The server's HTTP behaviour and its text.
python3 - "$sport" <<'PY' || fail=1
import http.client, socket, sys, time
port = int(sys.argv[1])
def req(method, path="/metrics"):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    c.request(method, path)
    r = c.getresponse()
    body = r.read()
    c.close()
    return r.status, r.getheader("Content-Type"), r.getheader("Allow"), body
bad = 0
st, ctype, _, body = req("GET")
if st != 200 or not ctype.startswith("text/plain; version=0.0.4") or b"vccl_scrape_rings" not in body:
    print("FAIL: GET /metrics: %s %s" % (st, ctype)); bad = 1
st, _, _, body = req("HEAD")
if st != 200 or body:
    print("FAIL: HEAD /metrics: %s with %d body bytes" % (st, len(body))); bad = 1
for m in ("POST", "PUT", "DELETE"):
    st, _, allow, _ = req(m)
    if st != 405 or allow != "GET, HEAD":
        print("FAIL: %s /metrics: %s, Allow %s" % (m, st, allow)); bad = 1
if req("GET", "/nothing")[0] != 404:
    print("FAIL: GET /nothing is not 404"); bad = 1
# 40 idle connections (above the limit of 32), and one client that sends half a request and stalls.
idle = []
for _ in range(40):
    try:
        idle.append(socket.create_connection(("127.0.0.1", port), timeout=5))
    except OSError:
        pass
slow = socket.create_connection(("127.0.0.1", port), timeout=10)
slow.sendall(b"GET /metr")
time.sleep(3)  # past serve's --timeout 2
try:
    closed = slow.recv(1) == b""
except OSError:
    closed = True
if not closed:
    print("FAIL: a stalled request was not timed out"); bad = 1
for s in idle:
    s.close()
slow.close()
time.sleep(0.5)
if req("GET")[0] != 200:
    print("FAIL: serve does not answer after idle and stalled clients"); bad = 1
if not bad:
    print("ok: GET, HEAD, 405 with Allow, 404, idle and stalled clients")
sys.exit(bad)
PY
promtool=$(command -v promtool)
if [ -n "$promtool" ]; then
    python3 -c "import urllib.request,sys; sys.stdout.buffer.write(urllib.request.urlopen('http://127.0.0.1:$sport/metrics').read())" \
        > "$tmp/metrics.txt"
    if "$promtool" check metrics < "$tmp/metrics.txt" > "$tmp/promtool.out" 2>&1; then
        echo "ok: promtool check metrics accepts the text ($(wc -c < "$tmp/metrics.txt") bytes)"
    elif grep -qi "error\|failed" "$tmp/promtool.out"; then
        echo "FAIL: promtool check metrics:"; head -20 "$tmp/promtool.out"; fail=1
    else
        echo "ok: promtool check metrics, lint notes only: $(head -3 "$tmp/promtool.out" | tr '\n' ' ')"
    fi
fi
touch "$tmp/hold"
wait "$load_pid" || { echo "FAIL: the job exited non-zero"; cat "$tmp/load.out"; fail=1; }
kill -0 "$serve_pid" 2>/dev/null || { echo "FAIL: serve is gone"; fail=1; }
[ $fail = 0 ] && echo "PASS: Prometheus scraped vccl-telemetry serve: bytes, collectives and latency as the job moved them"
exit $fail
