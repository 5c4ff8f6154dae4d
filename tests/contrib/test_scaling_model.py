#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Checks contrib/scaling-model/model.py (test_scaling_model.py SRCDIR): its predictions against formulas worked out
here by hand from the algorithms' schedules, its invariants from 2 to 1,024 hosts, its check against the
emulated-host measurements within the bound its README states, the SVG it writes, and clear errors on bad input.
Prints PASS/FAIL lines; exit status 1 on any failure."""
import os
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

SRC = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), '..', '..')
MODEL = os.path.join(SRC, 'contrib', 'scaling-model', 'model.py')
sys.dont_write_bytecode = True  # the source tree may be read-only (distcheck)
sys.path.insert(0, os.path.dirname(MODEL))
import model as m  # noqa: E402

MiB, GiB = 1 << 20, 1 << 30
failures = []


def check(ok, what):
    print('%s %s' % ('PASS' if ok else 'FAIL', what))
    if not ok:
        failures.append(what)


def close(a, b, rel=1e-9):
    return abs(a - b) <= rel * max(abs(a), abs(b))


def run(*args):
    p = subprocess.run([sys.executable, MODEL] + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       universal_newlines=True, timeout=60)
    return p.returncode, p.stdout, p.stderr


# 1. Against hand-worked schedules. Emulated 2 hosts x 2 ranks, S = 64 MiB.
p = m.EMULATED_1G
S = 64 * MiB
li, lr, bi, br, rb, cb = p['intra_lat'], p['rail_lat'], p['intra_bw'], p['rail_bw'], p['reduce_bw'], p['copy_bw']
# two-level allreduce: reduce-scatter of S in the host (1 step, S/2 sent, S/2 reduced), ring allreduce of S/2
# over the rail (2 steps, S/2 per link, S/4 reduced), allgather in the host (1 step, S/2 sent).
want = (li + S / 2 / bi + S / 2 / rb) + (2 * lr + S / 2 / br + S / 4 / rb) + (li + S / 2 / bi)
check(close(m.predict('allreduce', 'two-level', 2, S, p), want), 'two-level allreduce 2x2 matches its schedule')
# flat ring allreduce over 4 ranks: 6 steps, 1.5 S per link, bound by the rail (slower than loopback here).
want = 6 * max(li, lr) + 1.5 * S / min(bi, br)
check(close(m.predict('allreduce', 'flat', 2, S, p), want), 'flat ring allreduce 2x2 matches its schedule')
# two-level allgather: rail allgather of the S/4 blocks (1 step, S/4), host allgather (1 step, S/2), copy S.
want = (lr + S / 4 / br) + (li + S / 2 / bi) + S / cb
check(close(m.predict('allgather', 'two-level', 2, S, p), want), 'two-level allgather 2x2 matches its schedule')
# two-level reducescatter: regroup copy S, host reduce-scatter (S/2 sent and reduced), rail (S/4 sent, reduced).
want = S / cb + (li + S / 2 / bi + S / 2 / rb) + (lr + S / 4 / br + S / 4 / rb)
check(close(m.predict('reducescatter', 'two-level', 2, S, p), want), 'two-level reducescatter 2x2 matches')
# 8-GPU host, defaults, 64 hosts, 1 GiB: ring of 2*7 steps in the host twice, ring of 2*63 steps per rail.
d = m.DEFAULTS
H, G = 64, 8
want = (7 * d['intra_lat'] + 7 / 8 * GiB / d['intra_bw']) * 2 + 126 * d['rail_lat'] + 2 * 63 / 64 * GiB / 8 / d['rail_bw']
check(close(m.predict('allreduce', 'two-level', H, GiB, d), want), 'two-level allreduce 64x8 matches its schedule')
# A failed rail: the backup carries two flows, so the rail phase's bandwidth term doubles, nothing else.
extra = 2 * 63 / 64 * GiB / 8 / d['rail_bw']
check(close(m.predict('allreduce', 'two-level', H, GiB, d, failed_rail=True) - m.predict('allreduce', 'two-level', H,
                                                                                         GiB, d), extra),
      'one failed rail costs two-level exactly its rail phase again')
check(close(m.predict('allreduce', 'flat', H, GiB, d, failed_rail=True), m.predict('allreduce', 'flat', H, GiB, d)),
      'one failed rail costs the flat ring nothing (its backup rail is idle)')
# Small allreduce, flat recursive doubling over 16 ranks (2 hosts x 8): 3 rounds in the host, 1 across.
want = 3 * (d['intra_lat'] + 8 / d['intra_bw']) + (d['rail_lat'] + 8 / d['rail_bw'])
check(close(m.predict('allreduce', 'flat', 2, 8, d), want), 'flat recursive doubling 2x8 at 8 B matches')
# nccl-tests' bus bandwidth.
check(close(m.busbw('allreduce', 4, 100.0, 1.0), 150.0) and close(m.busbw('allgather', 4, 100.0, 1.0), 75.0),
      'busbw factors are 2(n-1)/n and (n-1)/n')

# 2. Invariants from 2 to 1,024 hosts x 8 GPUs and on the emulated hosts.
hosts = [2, 3, 4, 8, 16, 64, 100, 256, 1024]
sizes = [8 << i for i in range(0, 30)]  # 8 B .. 4 GiB
mono = bad_two = bad_fail = bad_bound = 0
for params in (m.DEFAULTS, m.EMULATED_1G):
    for coll in m.COLLS:
        for algo in m.ALGOS:
            for h in hosts:
                prev = 0.0
                for s in sizes:
                    t = m.predict(coll, algo, h, s, params)
                    tf = m.predict(coll, algo, h, s, params, failed_rail=True)
                    mono += t < prev * (1 - 1e-12)
                    bad_fail += tf < t * (1 - 1e-12)
                    prev = t
                    if algo == 'two-level' and h > 1:
                        # No schedule beats the bytes that must cross each host's rails: (H-1)/H of S/G per rail
                        # (twice for allreduce).
                        k = 2.0 if coll == 'allreduce' else 1.0
                        bad_bound += t < k * (h - 1) / h * s / params['gpus'] / params['rail_bw'] * (1 - 1e-12)
                        if s >= 16 * MiB:
                            bad_two += t > m.predict(coll, 'flat', h, s, params) * (1 + 1e-12)
check(mono == 0, 'time never falls as the size grows (every collective, algorithm, host count)')
check(bad_fail == 0, 'a failed rail never makes a collective faster')
check(bad_bound == 0, 'two-level is never faster than its rails allow')
check(bad_two == 0, 'two-level is at least as fast as flat from 16 MiB, 2 to 1,024 hosts')
gain = [m.predict('allreduce', 'flat', h, GiB, d) / m.predict('allreduce', 'two-level', h, GiB, d) for h in hosts]
check(min(gain) > 3.0, 'two-level allreduce of 1 GiB beats the flat ring by > 3x on 8-GPU hosts (min %.1fx)' % min(gain))
one = m.predict('allreduce', 'one-host', 1, GiB, d)
check(all(m.predict('allreduce', 'two-level', h, GiB, d) > one for h in hosts), 'crossing hosts never beats one host')

# 3. The check against the emulated-host measurements holds the bound the README states.
rows = m.check_rows()
lines, ok = m.check_summary(rows, 15.0)
big = [r for r in rows if r[2] >= m.LARGE]
mean = sum(abs(r[6]) for r in big) / len(big)
within = sum(1 for r in big if abs(r[6]) <= 15.0)
check(ok and len(big) == 36, 'emulated hosts: mean |error| %.1f%% <= 15%%, max %.1f%% <= 30%%' % (
    mean, max(abs(r[6]) for r in big)))
check(within >= 29, 'emulated hosts: %d of 36 bandwidth rows within 15%% (README: 29)' % within)
fit = m.fit_emulated(1e9)
check(all(close(fit[k], m.EMULATED_1G[k], 2e-3) for k in m.EMULATED_1G),
      'EMULATED_1G is what `model.py fit` derives from the 1 Gbit/s run')
rc, out, err = run('check')
check(rc == 0 and '# PASS' in out, 'model.py check passes')

# 4. The plot is a well-formed SVG with the four predicted curves.
with tempfile.TemporaryDirectory() as tmp:
    svg = os.path.join(tmp, 'p.svg')
    rc, out, err = run('plot', '--out', svg)
    try:
        root = ET.parse(svg).getroot()
        paths = [e for e in root.iter() if e.tag.endswith('path')]
        check(rc == 0 and len(paths) == 4, 'plot writes an SVG with 4 curves')
    except (OSError, ET.ParseError) as e:
        check(False, 'plot writes a parsable SVG (%s)' % e)
    ref = os.path.join(tmp, 'ref.csv')
    with open(ref, 'w') as f:
        f.write('# hosts,gpus,busbw,label,source\n128,8,150,example,https://example.invalid\n')
    rc, out, err = run('plot', '--out', svg, '--reference', ref)
    check(rc == 0 and 'example' in open(svg).read(), 'plot marks reference points it is given')
    with open(ref, 'w') as f:
        f.write('128,eight,150\n')
    rc, out, err = run('plot', '--out', svg, '--reference', ref)
    check(rc != 0 and 'ref.csv:1' in err and 'Traceback' not in err, 'a malformed reference file is a clear error')
    bad = os.path.join(tmp, 'bad.json')
    with open(bad, 'w') as f:
        f.write('{"rail_bandwidth": 1e9}')
    rc, out, err = run('predict', '--params', bad)
    check(rc != 0 and 'unknown parameter' in err and 'Traceback' not in err, 'an unknown parameter is a clear error')
    with open(bad, 'w') as f:
        f.write('{"rail_bw": -1}')
    rc, out, err = run('predict', '--params', bad)
    check(rc != 0 and 'rail_bw' in err and 'Traceback' not in err, 'a negative bandwidth is a clear error')
    with open(bad, 'w') as f:
        f.write('{not json')
    rc, out, err = run('predict', '--params', bad)
    check(rc != 0 and 'cannot read' in err and 'Traceback' not in err, 'a file that is not JSON is a clear error')
rc, out, err = run('plot', '--out', os.devnull, '--reference', os.path.join(SRC, 'no-such-file.csv'))
check(rc != 0 and 'cannot read' in err and 'Traceback' not in err, 'a missing reference file is a clear error')
rc, out, err = run('predict', '--size', '0')
check(rc != 0 and 'size' in err and 'Traceback' not in err, 'size 0 is a clear error')
rc, out, err = run('predict', '--hosts', '0')
check(rc != 0 and 'hosts' in err and 'Traceback' not in err, '0 hosts is a clear error')
rc, out, err = run('predict', '--gpus', '0')
check(rc != 0 and 'gpus' in err and 'Traceback' not in err, '0 GPUs per host is a clear error')
rc, out, err = run('predict', '--coll', 'allreduce', '--size', '1G', '--hosts', '1024')
check(rc == 0 and 'two-level' in out, 'predict runs at 1,024 hosts')

print('%d failure(s)' % len(failures))
sys.exit(1 if failures else 0)
