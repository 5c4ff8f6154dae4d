#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Scaling model of vccl's host-level AllReduce, AllGather and ReduceScatter (standard library only).

From the bandwidth and latency of the links inside a host and of one rail between hosts, it predicts the time and
bus bandwidth of the algorithms' schedules as src/algo/host/ and src/algo/twolevel/ run them:

  one-host   ring over the G ranks of one host (allreduce: recursive doubling up to small_bytes)
  flat       ring over all H*G ranks, numbered host by host: inside a host the hops are intra-host links, the
             hop from local rank G-1 of host h to local rank 0 of host h+1 leaves on rail G-1, so the ring uses
             one rail per host and every link carries 2(n-1)/n of S; allreduce up to small_bytes (or fewer
             elements than ranks) is recursive doubling, whose rounds of distance >= G cross hosts on every rail
  two-level  allreduce: reduce-scatter in the host, allreduce of S/G per rail (ring; recursive doubling up to
             small_bytes), allgather in the host; up to small_bytes: allreduce in the host, then over every rail.
             allgather: allgather of the S/n blocks per rail, allgather in the host, reorder copy of S.
             reducescatter: regroup copy of S, reduce-scatter in the host, reduce-scatter over every rail.

A pipelined ring takes steps * latency + (bytes per link) / (slowest link's bandwidth); a phase of recursive
doubling takes per round latency + bytes / bandwidth. Phases of the two-level algorithms run one after another.
Where ranks reduce or copy on a CPU (reduce_bw, copy_bw > 0) those bytes cost time on top; 0 means the cost is
hidden (GPU kernels reduce while they copy). A failed rail moves its flows onto a backup rail: a rail that then
carries k flows gives each 1/k of its bandwidth.

Sizes follow nccl-tests: AllReduce S is the buffer, AllGather S the whole output, ReduceScatter S the whole input;
busbw = S/t * 2(n-1)/n (AllReduce) or S/t * (n-1)/n.

Commands (see contrib/scaling-model/README.md):
  model.py predict [--hosts H] [--size S] [params]   time and busbw of every algorithm, per size or host count
  model.py check [--tolerance PCT]                   predictions against the emulated-host measurements
  model.py plot [--out FILE.svg] [--reference CSV]   busbw against hosts (64-1,024) as SVG
  model.py fit                                       the emulated-host parameters, fitted from the measurements
"""
import argparse
import json
import math
import sys

KiB, MiB, GiB = 1 << 10, 1 << 20, 1 << 30

# Nominal 8-GPU host (defaults; override with options or --params FILE.json). intra_bw: vccl's 1 GiB AllReduce
# bus bandwidth on 2x H200 (docs/PERFORMANCE.md, 2845 us); intra_lat: its 8 B AllReduce (7.2 us). Rails are not
# measured: 400 Gbit/s (NDR / ConnectX-7) at the 0.9 of line rate the emulated rails reach, 5 us per message.
DEFAULTS = {
    'gpus': 8,                 # ranks (GPUs) per host, G
    'intra_bw': 377e9,         # bytes/s a rank moves to a rank of its host, per direction
    'intra_lat': 7.2e-6,       # seconds per intra-host step
    'rail_bw': 45e9,           # bytes/s of one rail (one NIC port) per direction
    'rail_lat': 5e-6,          # seconds per inter-host step
    'reduce_bw': 0.0,          # bytes/s one rank reduces when that is not hidden (0: hidden)
    'copy_bw': 0.0,            # bytes/s of a local copy when not hidden (0: hidden)
    'small_bytes': 64 * KiB,   # VCCL_ALLREDUCE_SMALL_BYTES
}

# The emulated hosts of contrib/bench-hosts.sh (2 hosts x 2 ranks, veth rails under tc tbf, TCP over loopback
# inside a host, all on 2 shared CPU cores), as `model.py fit` derives them from the 1 Gbit/s table below:
# rail_bw from the flat rows (network-bound), intra_bw, reduce_bw and copy_bw from the two-level rows,
# the latencies from the small allreduce rows. rail_bw comes out at 0.89 of the tbf rate.
EMULATED_1G = {
    'gpus': 2, 'intra_bw': 462.6e6, 'intra_lat': 245.5e-6, 'rail_bw': 111.3e6, 'rail_lat': 245.5e-6,
    'reduce_bw': 611e6, 'copy_bw': 2.764e9, 'small_bytes': 64 * KiB,
}

# docs/PERFORMANCE.md, "Across emulated hosts: two-level against flat": out-of-place ms, the slowest rank.
# (rate in bit/s, collective, bytes, flat ms, two-level ms)
MEASURED = [
    (1e9, 'allreduce', 16 * MiB, 218, 135), (1e9, 'allreduce', 64 * MiB, 864, 457),
    (1e9, 'allreduce', 256 * MiB, 3683, 2659),
    (1e9, 'allgather', 16 * MiB, 128, 67), (1e9, 'allgather', 64 * MiB, 442, 247),
    (1e9, 'allgather', 256 * MiB, 1833, 931),
    (1e9, 'reducescatter', 16 * MiB, 110, 115), (1e9, 'reducescatter', 64 * MiB, 455, 335),
    (1e9, 'reducescatter', 256 * MiB, 1815, 1115),
    (1e9, 'allreduce', 8, 0.777, 0.748), (1e9, 'allreduce', 64, 0.580, 0.366), (1e9, 'allreduce', 512, 0.513, 0.411),
    (1e9, 'allreduce', 4 * KiB, 0.469, 0.389), (1e9, 'allreduce', 32 * KiB, 1.675, 1.289),
    (5e8, 'allreduce', 16 * MiB, 510, 348), (5e8, 'allreduce', 64 * MiB, 2001, 1039),
    (5e8, 'allreduce', 256 * MiB, 10782, 5543),
    (5e8, 'allgather', 16 * MiB, 232, 156), (5e8, 'allgather', 64 * MiB, 926, 642),
    (5e8, 'allgather', 256 * MiB, 3744, 2103),
    (5e8, 'reducescatter', 16 * MiB, 266, 179), (5e8, 'reducescatter', 64 * MiB, 889, 645),
    (5e8, 'reducescatter', 256 * MiB, 3878, 2064),
]
EMULATED_HOSTS = 2
LARGE = 1 * MiB  # rows at or above this size are bandwidth rows, the ones the tolerance applies to

COLLS = ('allreduce', 'allgather', 'reducescatter')
ALGOS = ('one-host', 'flat', 'two-level')


def emulated_params(rate):
    """The emulated-host parameters at a tbf rate of `rate` bit/s: rails scale with the rate, the rest stays."""
    p = dict(EMULATED_1G)
    p['rail_bw'] = EMULATED_1G['rail_bw'] * rate / 1e9
    return p


def _cpu(nbytes, bw):
    return nbytes / bw if bw > 0 else 0.0


def _rail_share(p, flows):
    return p['rail_bw'] / max(1, flows)


def _ring(steps, per_link, lat, bw):
    return steps * lat + per_link / bw


def _rd_rounds(n):
    """(rounds of the doubling, extra fold rounds) of recursive doubling over n ranks."""
    pw = 1
    while pw * 2 <= n:
        pw *= 2
    return int(round(math.log2(pw))), (2 if n > pw else 0)


def _rd_intra(p, n, nbytes):
    rounds, fold = _rd_rounds(n)
    per = p['intra_lat'] + nbytes / p['intra_bw'] + _cpu(nbytes, p['reduce_bw'])
    return (rounds + fold) * per


def _rd_rail(p, n, nbytes, flows):
    rounds, fold = _rd_rounds(n)
    per = p['rail_lat'] + nbytes / _rail_share(p, flows) + _cpu(nbytes, p['reduce_bw'])
    return (rounds + fold) * per


def _intra_ring(p, coll, g, nbytes):
    """A ring over the g ranks of one host; nbytes as nccl-tests counts it for coll."""
    if g <= 1:
        return 0.0
    if coll == 'allreduce':
        if nbytes <= p['small_bytes']:
            return _rd_intra(p, g, nbytes)
        per_link, steps, reduced = 2.0 * (g - 1) / g * nbytes, 2 * (g - 1), (g - 1) / g * nbytes
    else:
        per_link, steps = (g - 1) / g * nbytes, g - 1
        reduced = per_link if coll == 'reducescatter' else 0.0
    return _ring(steps, per_link, p['intra_lat'], p['intra_bw']) + _cpu(reduced, p['reduce_bw'])


def _rail_coll(p, coll, h, nbytes, flows):
    """The inter-host phase over the h ranks of one rail (nbytes as nccl-tests counts it over those h ranks)."""
    if h <= 1:
        return 0.0
    bw = _rail_share(p, flows)
    if coll == 'allreduce':
        if nbytes <= p['small_bytes']:
            return _rd_rail(p, h, nbytes, flows)
        per_link, steps = 2.0 * (h - 1) / h * nbytes, 2 * (h - 1)
        reduced = (h - 1) / h * nbytes
    else:
        per_link, steps = (h - 1) / h * nbytes, h - 1
        reduced = per_link if coll == 'reducescatter' else 0.0
    return _ring(steps, per_link, p['rail_lat'], bw) + _cpu(reduced, p['reduce_bw'])


def predict(coll, algo, hosts, nbytes, p, failed_rail=False):
    """Seconds of one collective of nbytes (nccl-tests' size) over hosts x p['gpus'] ranks."""
    g = int(p['gpus'])
    h = 1 if algo == 'one-host' else int(hosts)
    n = h * g
    if coll not in COLLS or algo not in ALGOS:
        raise ValueError('unknown collective or algorithm: %s %s' % (coll, algo))
    if nbytes <= 0 or n < 1:
        raise ValueError('size and ranks must be positive')
    if h == 1:
        return _intra_ring(p, coll, g, nbytes)
    if algo == 'flat':
        small = coll == 'allreduce' and (nbytes <= p['small_bytes'] or nbytes // 4 < n)
        if small:
            # Recursive doubling: rounds of distance < G stay in the host, the others cross on every rail.
            rounds, fold = _rd_rounds(n)
            intra_rounds = min(rounds, int(round(math.log2(g))) if g & (g - 1) == 0 else 0)
            flows = 2 if failed_rail else 1
            per_i = p['intra_lat'] + nbytes / p['intra_bw'] + _cpu(nbytes, p['reduce_bw'])
            per_r = p['rail_lat'] + nbytes / _rail_share(p, flows) + _cpu(nbytes, p['reduce_bw'])
            return (intra_rounds + fold) * per_i + (rounds - intra_rounds) * per_r
        # One ring over every rank: its host-crossing hop uses one rail of each host; a failed rail's flow moves
        # to a backup rail that the ring leaves idle, so it still carries one flow.
        frac, steps = (2.0 * (n - 1) / n, 2 * (n - 1)) if coll == 'allreduce' else ((n - 1) / n, n - 1)
        bw = min(p['intra_bw'], p['rail_bw'])
        lat = max(p['intra_lat'], p['rail_lat'])
        t = _ring(steps, frac * nbytes, lat, bw)
        if p['reduce_bw'] > 0 and coll != 'allgather':
            # The reduction of each chunk is pipelined with the transfers: it binds only when it is slower.
            t = max(t, steps * lat + frac / 2 * nbytes / p['reduce_bw'] * (2 if coll == 'reducescatter' else 1))
        return t
    # two-level: every rail carries one flow; with one failed, its backup carries two and gates the phase.
    flows = 2 if failed_rail else 1
    if coll == 'allreduce':
        if nbytes <= p['small_bytes'] or nbytes // 4 < g:
            return _intra_ring(p, 'allreduce', g, nbytes) + _rail_coll(p, 'allreduce', h, nbytes, flows)
        return (_intra_ring(p, 'reducescatter', g, nbytes) + _rail_coll(p, 'allreduce', h, nbytes / g, flows)
                + _intra_ring(p, 'allgather', g, nbytes))
    if coll == 'allgather':
        return (_rail_coll(p, 'allgather', h, nbytes / g, flows) + _intra_ring(p, 'allgather', g, nbytes)
                + _cpu(nbytes, p['copy_bw']))
    return (_cpu(nbytes, p['copy_bw']) + _intra_ring(p, 'reducescatter', g, nbytes)
            + _rail_coll(p, 'reducescatter', h, nbytes / g, flows))


def busbw(coll, n, nbytes, seconds):
    factor = 2.0 * (n - 1) / n if coll == 'allreduce' else (n - 1) / n
    return nbytes / seconds * factor


def parse_size(text):
    t = text.strip().upper().rstrip('B')
    mult = {'K': KiB, 'M': MiB, 'G': GiB}.get(t[-1:], 1) if t else 1
    if t[-1:] in ('K', 'M', 'G'):
        t = t[:-1]
    try:
        v = float(t) * mult
    except ValueError:
        raise argparse.ArgumentTypeError('not a size: %r (use e.g. 8, 64K, 16M, 1G)' % text)
    if v <= 0:
        raise argparse.ArgumentTypeError('size must be positive: %r' % text)
    return int(v)


def fmt_size(b):
    for unit, s in (('GiB', GiB), ('MiB', MiB), ('KiB', KiB)):
        if b >= s and b % s == 0:
            return '%d %s' % (b // s, unit)
    return '%d B' % b


def load_params(args):
    p = dict(EMULATED_1G if getattr(args, 'emulated', False) else DEFAULTS)
    if args.params:
        try:
            with open(args.params) as f:
                extra = json.load(f)
        except (OSError, ValueError) as e:
            sys.exit('model.py: cannot read %s: %s' % (args.params, e))
        if not isinstance(extra, dict):
            sys.exit('model.py: %s must hold a JSON object of parameters' % args.params)
        for k, v in extra.items():
            if k not in DEFAULTS:
                sys.exit('model.py: %s: unknown parameter %r (known: %s)' % (args.params, k, ', '.join(DEFAULTS)))
            p[k] = v
    for k in DEFAULTS:
        v = getattr(args, k, None)
        if v is not None:
            p[k] = v
    for k, v in p.items():
        if not isinstance(v, (int, float)) or isinstance(v, bool) or v < 0:
            sys.exit('model.py: parameter %s must be a number >= 0, not %r' % (k, v))
    for k in ('gpus', 'intra_bw', 'rail_bw'):
        if p[k] <= 0:
            sys.exit('model.py: parameter %s must be > 0' % k)
    p['gpus'] = int(p['gpus'])
    return p


# ---- fit: the emulated parameters from one run's rows ----

def _solve(a, b):
    """Least squares a x = b (small dense, normal equations, Gaussian elimination)."""
    m = len(a[0])
    ata = [[sum(r[i] * r[j] for r in a) for j in range(m)] for i in range(m)]
    atb = [sum(r[i] * y for r, y in zip(a, b)) for i in range(m)]
    for c in range(m):
        piv = max(range(c, m), key=lambda r: abs(ata[r][c]))
        ata[c], ata[piv], atb[c], atb[piv] = ata[piv], ata[c], atb[piv], atb[c]
        for r in range(m):
            if r != c and ata[c][c] != 0:
                f = ata[r][c] / ata[c][c]
                ata[r] = [x - f * y for x, y in zip(ata[r], ata[c])]
                atb[r] -= f * atb[c]
    return [atb[i] / ata[i][i] if ata[i][i] else 0.0 for i in range(m)]


def fit_emulated(rate=1e9):
    """The emulated-host parameters from the run at `rate` bit/s, by least squares on the relative error:
    rail_bw from its flat rows >= 1 MiB (network-bound), intra_bw, reduce_bw and copy_bw from its two-level rows
    >= 1 MiB, the latencies from the 1 Gbit/s small allreduce rows (the only small rows measured)."""
    rows = [r for r in MEASURED if r[0] == rate and r[2] >= LARGE]
    if not rows:
        raise ValueError('no measured run at %g bit/s' % rate)
    n = EMULATED_HOSTS * EMULATED_1G['gpus']
    xs = [(2.0 * (n - 1) / n if c == 'allreduce' else (n - 1.0) / n) * s for _, c, s, _, _ in rows]
    ys = [f / 1e3 for _, _, _, f, _ in rows]
    rail = 1.0 / _solve([[x / y] for x, y in zip(xs, ys)], [1.0] * len(ys))[0]
    # Two-level rows (G = H = 2): t = net/rail_bw + sent/intra_bw + reduced/reduce_bw + copied/copy_bw.
    a, b = [], []
    for _, c, s, _, two in rows:
        if c == 'allreduce':
            net, terms = 0.5 * s, [s, 0.75 * s, 0.0]
        elif c == 'allgather':
            net, terms = 0.25 * s, [0.5 * s, 0.0, s]
        else:
            net, terms = 0.25 * s, [0.5 * s, 0.75 * s, s]
        t = two / 1e3
        a.append([x / t for x in terms])
        b.append((t - net / rail) / t)
    cols = [0, 1, 2]
    while True:  # a term whose coefficient comes out negative is a hidden cost: drop it and refit the rest
        inv = _solve([[r[i] for i in cols] for r in a], b)
        neg = [c for c, v in zip(cols, inv) if v <= 0]
        if not neg or len(cols) == 1:
            break
        cols.remove(neg[0])
    p = dict(EMULATED_1G)
    p.update({'rail_bw': rail, 'reduce_bw': 0.0, 'copy_bw': 0.0})
    for c, v in zip(cols, inv):
        p[('intra_bw', 'reduce_bw', 'copy_bw')[c]] = 1.0 / v if v > 0 else 0.0
    small = sorted(x for r in MEASURED if r[0] == 1e9 and r[2] <= 4 * KiB for x in (r[3], r[4]))
    p['intra_lat'] = p['rail_lat'] = (small[len(small) // 2 - 1] + small[len(small) // 2]) / 2 / 1e3 / 2
    return p


def cmd_fit(_args):
    for rate in sorted({r[0] for r in MEASURED}, reverse=True):
        p = fit_emulated(rate)
        print('# the run with %g Gbit/s rails' % (rate / 1e9))
        print('rail_bw   %.4g B/s (%.3f of the tbf rate), from the flat rows >= 1 MiB' % (
            p['rail_bw'], p['rail_bw'] * 8 / rate))
        for k in ('intra_bw', 'reduce_bw', 'copy_bw'):
            print('%-9s %s, from the two-level rows >= 1 MiB' % (k, '%.4g B/s' % p[k] if p[k] else 'hidden'))
        print('intra_lat = rail_lat = %.4g s: half the median of the 1 Gbit/s 8 B - 4 KiB allreduce rows (one '
              'intra-host and one inter-host round)' % p['rail_lat'])
    return 0


# ---- check: predictions against the emulated-host measurements ----

def check_rows():
    """(rate, coll, bytes, algo, measured s, predicted s with that run's own fit, error %, predicted s with the
    1 Gbit/s fit and rails scaled to the run's rate, error %) for every measured figure."""
    rows = []
    own = {}
    for rate, coll, nbytes, flat_ms, two_ms in MEASURED:
        if rate not in own:
            own[rate] = fit_emulated(rate)
        for algo, ms in (('flat', flat_ms), ('two-level', two_ms)):
            meas = ms / 1e3
            t = predict(coll, algo, EMULATED_HOSTS, nbytes, own[rate])
            tx = predict(coll, algo, EMULATED_HOSTS, nbytes, emulated_params(rate))
            rows.append((rate, coll, nbytes, algo, meas, t, 100.0 * (t - meas) / meas, tx,
                         100.0 * (tx - meas) / meas))
    return rows


def _stats(errs):
    errs = [abs(e) for e in errs]
    return len(errs), sum(errs) / len(errs), max(errs)


def check_summary(rows, tolerance):
    """Lines of the summary, and whether the stated bound holds: with each run's own fit, the mean |error| of the
    bandwidth rows within `tolerance` and no row over twice that."""
    out = []
    big = [r for r in rows if r[2] >= LARGE]
    n, mean, worst = _stats([r[6] for r in big])
    within = sum(1 for r in big if abs(r[6]) <= tolerance)
    out.append('bandwidth rows (>= 1 MiB), each run with its own fit: %d, %d within %.0f%%, mean |error| %.1f%%, '
               'max %.1f%%' % (n, within, tolerance, mean, worst))
    ok = mean <= tolerance and worst <= 2 * tolerance
    for rate in sorted({r[0] for r in big}, reverse=True):
        for algo in ('flat', 'two-level'):
            sel = [r for r in big if r[0] == rate and r[3] == algo]
            _, m1, w1 = _stats([r[6] for r in sel])
            _, m2, w2 = _stats([r[8] for r in sel])
            out.append('  %g Gbit/s %-9s own fit: mean %.1f%% max %.1f%%; 1 Gbit/s fit: mean %.1f%% max %.1f%%' % (
                rate / 1e9, algo, m1, w1, m2, w2))
    small = [r for r in rows if r[2] < LARGE]
    n, mean, worst = _stats([r[6] for r in small])
    out.append('latency rows (< 1 MiB, not held to the bound): %d, mean |error| %.1f%%, max %.1f%%' % (
        n, mean, worst))
    return out, ok


def cmd_check(args):
    rows = check_rows()
    print('# emulated hosts: %d hosts x %d ranks, rails under tbf. "own fit": the parameters fitted from that run; '
          '"1G fit": those of the 1 Gbit/s run, rails scaled to the rate' % (EMULATED_HOSTS, EMULATED_1G['gpus']))
    print('%-5s %-13s %8s %-9s %10s %10s %7s %10s %7s' % ('rails', 'collective', 'bytes', 'algorithm', 'measured',
                                                          'own fit', 'error', '1G fit', 'error'))
    for rate, coll, nbytes, algo, meas, pred, err, predx, errx in rows:
        unit, scale = ('ms', 1e3) if nbytes >= LARGE else ('us', 1e6)
        print('%-5s %-13s %8s %-9s %7.1f %s %7.1f %s %+6.1f%% %7.1f %s %+6.1f%%' % (
            '%gG' % (rate / 1e9), coll, fmt_size(nbytes), algo, meas * scale, unit, pred * scale, unit, err,
            predx * scale, unit, errx))
    lines, ok = check_summary(rows, args.tolerance)
    for line in lines:
        print('# ' + line)
    print('# %s: mean |error| of the bandwidth rows <= %.0f%% and none over %.0f%%' % (
        'PASS' if ok else 'FAIL', args.tolerance, 2 * args.tolerance))
    return 0 if ok else 1


# ---- predict ----

def cmd_predict(args):
    p = load_params(args)
    sizes = args.size or [64 * MiB, 1 * GiB]
    hosts = args.hosts or [2, 4, 8, 16, 32, 64, 128, 256, 512, 1024]
    colls = [args.coll] if args.coll else list(COLLS)
    print('# %d GPUs per host; intra %.3g B/s %.3g s; rail %.3g B/s %.3g s; reduce %s; copy %s' % (
        p['gpus'], p['intra_bw'], p['intra_lat'], p['rail_bw'], p['rail_lat'],
        '%.3g B/s' % p['reduce_bw'] if p['reduce_bw'] else 'hidden', '%.3g B/s' % p['copy_bw'] if p['copy_bw']
        else 'hidden'))
    print('%-13s %8s %5s %-9s %12s %10s %12s %10s' % ('collective', 'bytes', 'hosts', 'algorithm', 'time us',
                                                     'busbw GB/s', '1 rail down', 'busbw GB/s'))
    for coll in colls:
        for s in sizes:
            g = p['gpus']
            t1 = predict(coll, 'one-host', 1, s, p)
            print('%-13s %8s %5d %-9s %12.1f %10.2f %12s %10s' % (coll, fmt_size(s), 1, 'one-host', t1 * 1e6,
                                                                  busbw(coll, g, s, t1) / 1e9, '-', '-'))
            for h in hosts:
                for algo in ('flat', 'two-level'):
                    t = predict(coll, algo, h, s, p)
                    tf = predict(coll, algo, h, s, p, failed_rail=True)
                    n = h * g
                    print('%-13s %8s %5d %-9s %12.1f %10.2f %12.1f %10.2f' % (
                        coll, fmt_size(s), h, algo, t * 1e6, busbw(coll, n, s, t) / 1e9, tf * 1e6,
                        busbw(coll, n, s, tf) / 1e9))
    return 0


# ---- plot ----

def read_reference(path):
    """CSV lines: hosts,gpus_per_host,busbw_GBps,label,source-url (# comments). Published figures only."""
    points = []
    try:
        f = open(path)
    except OSError as e:
        sys.exit('model.py: cannot read %s: %s' % (path, e))
    with f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line or line.startswith('#'):
                continue
            parts = [x.strip() for x in line.split(',', 4)]
            try:
                points.append((int(parts[0]), int(parts[1]), float(parts[2]), parts[3], parts[4]))
            except (ValueError, IndexError):
                sys.exit('model.py: %s:%d: expected hosts,gpus_per_host,busbw_GBps,label,source' % (path, n))
    return points


def _esc(text):
    return str(text).replace('&', '&amp;').replace('<', '&lt;').replace('>', '&gt;').replace('"', '&quot;')


def svg_plot(series, refs, title, xlabel, ylabel, xs, notes=()):
    w, h, left, right, top, bottom = 880, 460 + 16 * len(notes), 70, 230, 40, 50 + 16 * len(notes)
    pw, ph = w - left - right, h - top - bottom
    ymax = max([y for _, _, pts in series for _, y in pts] + [r[2] for r in refs] + [1.0])
    step = 10 ** (math.floor(math.log10(ymax)) - 1)
    for m in (1, 2, 5, 10):
        if ymax / (m * step) <= 6:
            step *= m
            break
    ymax = math.ceil(ymax / step) * step
    lx0, lx1 = math.log2(xs[0]), math.log2(xs[-1])
    px = lambda x: left + (math.log2(x) - lx0) / (lx1 - lx0) * pw
    py = lambda y: top + ph - y / ymax * ph
    out = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" '
           'font-size="12">' % (w, h), '<rect width="100%" height="100%" fill="white"/>',
           '<text x="%d" y="22" font-size="14">%s</text>' % (left, title)]
    y = 0.0
    while y <= ymax + 1e-9:
        out.append('<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#ddd"/>' % (left, left + pw, py(y), py(y)))
        out.append('<text x="%d" y="%.1f" text-anchor="end">%g</text>' % (left - 6, py(y) + 4, y))
        y += step
    for x in xs:
        out.append('<line x1="%.1f" x2="%.1f" y1="%d" y2="%d" stroke="#ddd"/>' % (px(x), px(x), top, top + ph))
        out.append('<text x="%.1f" y="%d" text-anchor="middle">%d</text>' % (px(x), top + ph + 16, x))
    out.append('<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="black"/>' % (left, top, pw, ph))
    out.append('<text x="%d" y="%d" text-anchor="middle">%s</text>' % (left + pw // 2, top + ph + 34, xlabel))
    for i, note in enumerate(notes):
        out.append('<text x="%d" y="%d" font-size="11">%s</text>' % (left, top + ph + 56 + 16 * i, _esc(note)))
    out.append('<text transform="translate(18,%d) rotate(-90)" text-anchor="middle">%s</text>' % (
        top + ph // 2, ylabel))
    ly = top + 10
    for label, (color, dash), pts in series:
        d = ' '.join('%s%.1f,%.1f' % ('M' if i == 0 else 'L', px(x), py(v)) for i, (x, v) in enumerate(pts))
        out.append('<path d="%s" fill="none" stroke="%s" stroke-width="2"%s/>' % (
            d, color, ' stroke-dasharray="%s"' % dash if dash else ''))
        for x, v in pts:
            out.append('<circle cx="%.1f" cy="%.1f" r="2.5" fill="%s"/>' % (px(x), py(v), color))
        out.append('<line x1="%d" x2="%d" y1="%d" y2="%d" stroke="%s" stroke-width="2"%s/>' % (
            left + pw + 12, left + pw + 36, ly, ly, color, ' stroke-dasharray="%s"' % dash if dash else ''))
        out.append('<text x="%d" y="%d">%s</text>' % (left + pw + 42, ly + 4, label))
        ly += 18
    for i, (hosts, _, bw, label, src) in enumerate(refs):
        out.append('<rect x="%.1f" y="%.1f" width="7" height="7" fill="black"><title>%s: %s</title></rect>' % (
            px(hosts) - 3.5, py(bw) - 3.5, _esc(label), _esc(src)))
        out.append('<text x="%d" y="%d">[%d] %s</text>' % (left + pw + 12, ly + 4, i + 1, _esc(label[:28])))
        ly += 18
    out.append('</svg>')
    return '\n'.join(out) + '\n'


def cmd_plot(args):
    p = load_params(args)
    xs = [64, 128, 256, 512, 1024]
    s = args.size[0] if args.size else 1 * GiB
    g = p['gpus']
    refs = read_reference(args.reference) if args.reference else []
    styles = [('two-level', False, ('#1f77b4', '')), ('two-level', True, ('#1f77b4', '6,4')),
              ('flat', False, ('#d62728', '')), ('flat', True, ('#d62728', '6,4'))]
    series = []
    for algo, failed, style in styles:
        pts = [(hh, busbw('allreduce', hh * g, s, predict('allreduce', algo, hh, s, p, failed)) / 1e9) for hh in xs]
        series.append(('%s%s' % (algo, ', 1 rail down' if failed else ''), style, pts))
    title = 'AllReduce %s, %d GPUs per host: predicted busbw (rail %.0f GB/s, intra %.0f GB/s)' % (
        fmt_size(s), g, p['rail_bw'] / 1e9, p['intra_bw'] / 1e9)
    notes = ['model.py plot%s; parameters: README.md. Flat with one rail down equals flat: its ring uses one rail'
             ' per host.' % (' --reference ' + args.reference.split('/')[-1] if args.reference else '')]
    if refs:
        notes.append('Black squares: published NCCL figures [n], sources in the reference file.')
    else:
        notes.append('No published NCCL AllReduce busbw at 64-1,024 hosts with numbers was found to plot beside it '
                     '(README.md, "Published figures").')
    svg = svg_plot(series, refs, title, 'hosts', 'busbw GB/s', xs, notes)
    with open(args.out, 'w') as f:
        f.write(svg)
    print('wrote %s' % args.out)
    for label, _, pts in series:
        print('%-24s %s' % (label, ' '.join('%d:%.1f' % (x, v) for x, v in pts)))
    for i, r in enumerate(refs):
        print('[%d] %d hosts x %d: %.1f GB/s  %s  %s' % (i + 1, r[0], r[1], r[2], r[3], r[4]))
    return 0


def main(argv):
    ap = argparse.ArgumentParser(description='Scaling model of vccl host collectives (see README.md).')
    sub = ap.add_subparsers(dest='cmd')
    for name in ('predict', 'plot'):
        sp = sub.add_parser(name)
        sp.add_argument('--params', help='JSON object of parameters (names as the options, without dashes)')
        sp.add_argument('--emulated', action='store_true', help='start from the emulated-host parameters')
        for k in DEFAULTS:
            sp.add_argument('--' + k, type=int if k == 'gpus' else float, default=None,
                            help='default %g' % DEFAULTS[k])
        sp.add_argument('--size', type=parse_size, action='append', help='bytes (8, 64K, 16M, 1G); repeatable')
        if name == 'predict':
            sp.add_argument('--hosts', type=int, action='append', help='host count; repeatable')
            sp.add_argument('--coll', choices=COLLS)
        else:
            sp.add_argument('--out', default='scaling.svg')
            sp.add_argument('--reference', help='CSV of published figures: hosts,gpus,busbw_GBps,label,source')
    sc = sub.add_parser('check')
    sc.add_argument('--tolerance', type=float, default=15.0, help='percent, for the >= 1 MiB rows (default 15)')
    sub.add_parser('fit')
    args = ap.parse_args(argv)
    if args.cmd is None:
        ap.print_help()
        return 2
    if getattr(args, 'hosts', None) and any(x < 1 for x in args.hosts):
        ap.error('--hosts must be >= 1')
    return {'predict': cmd_predict, 'check': cmd_check, 'plot': cmd_plot, 'fit': cmd_fit}[args.cmd](args)


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
