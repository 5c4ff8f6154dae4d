#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Listed in tests/mpi/Makefile.inc: vccl-diag sweep --json on 3 ranks (host memory, shared memory/loopback
# transport). Checks the JSON against itself: a 3x3 matrix with an empty diagonal and positive links, the
# median, the slowest link and rank, and slow links exactly those below fraction x median. The exit status
# must match the findings (0 none, 1 some; timings on a shared machine may flag a link). A second run with
# --fraction 0 can have no findings and must exit 0.
top_builddir=${top_builddir:-.}
run="$(dirname "$0")/run-mpi-test.sh"
command -v python3 >/dev/null 2>&1 || { echo "np3_diag.sh: SKIP: no python3 to check the JSON"; exit 77; }
out=${TMPDIR:-/tmp}/np3_diag.$$.out
trap 'rm -f "$out"' EXIT

check() { # check EXPECTED_FRACTION RC
    python3 - "$out" "$1" "$2" <<'PY'
import json, sys
lines = [l for l in open(sys.argv[1]) if l.startswith('{"sweep"')]
assert len(lines) == 1, "expected one JSON line from rank 0, got %d" % len(lines)
doc = json.loads(lines[0])
d, fraction, rc = doc["sweep"], float(sys.argv[2]), int(sys.argv[3])
m = d["matrix"]
assert d["nranks"] == 3 and len(m) == 3 and all(len(r) == 3 for r in m), m
links = [(s, t, m[s][t]) for s in range(3) for t in range(3) if s != t]
assert all(m[i][i] is None for i in range(3)), m
assert all(bw > 0 for _, _, bw in links), m
vals = sorted(bw for _, _, bw in links)
assert abs(d["median"] - (vals[2] + vals[3]) / 2) <= 1, (d["median"], vals)
assert d["fraction"] == fraction
low = min(links, key=lambda l: l[2])
assert d["slowest_link"]["bw"] == low[2], d["slowest_link"]
assert 0 <= d["slowest_rank"]["rank"] < 3
expect = sorted((s, t) for s, t, bw in links if bw < fraction * d["median"])
assert sorted((l["src"], l["dst"]) for l in d["slow_links"]) == expect, (d["slow_links"], expect)
assert doc["findings"] == len(d["findings"])
assert rc == (1 if doc["findings"] else 0), "exit status %d with %d findings" % (rc, doc["findings"])
print("np3_diag.sh: JSON ok (fraction %g, %d findings, exit %d)" % (fraction, doc["findings"], rc))
PY
}

"$run" 3 "$top_builddir/vccl-diag" sweep --json -b 1M -n 3 >"$out"
rc=$?
cat "$out"
[ "$rc" = 0 ] || [ "$rc" = 1 ] || { echo "np3_diag.sh: vccl-diag sweep failed with $rc" >&2; exit 1; }
check 0.5 "$rc" || exit 1

"$run" 3 "$top_builddir/vccl-diag" sweep --json -b 256K -n 2 --fraction 0 >"$out"
rc=$?
cat "$out"
[ "$rc" = 0 ] || { echo "np3_diag.sh: --fraction 0 must give no findings and exit 0, got $rc" >&2; exit 1; }
check 0 "$rc" || exit 1
