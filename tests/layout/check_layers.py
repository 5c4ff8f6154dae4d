#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""The layering of src/ (docs/ARCHITECTURE.md): every #include "layer/..." of a file under src/<layer>/ must name a
layer that <layer> may use, and MPI, CUDA, UCX and verbs headers appear only in their folders. Prints every
violation with its file and line; exit status 1 when there is one."""
import os
import re
import sys

ALLOWED = {
    'core': set(),
    'topo': {'core'},
    'bootstrap': {'core'},
    'telemetry': {'core'},
    'device': {'core'},
    'transport': {'core', 'device', 'telemetry', 'bootstrap'},
    'exec': {'core', 'device', 'telemetry', 'transport'},
    'algo': {'core', 'device', 'telemetry', 'transport', 'exec'},
    'comm': {'core', 'topo', 'bootstrap', 'telemetry', 'device', 'transport', 'exec', 'algo'},
    'api': {'core', 'topo', 'bootstrap', 'telemetry', 'device', 'transport', 'exec', 'algo', 'comm'},
    'nccl_compat': {'core'},
    'tools': {'core', 'topo', 'telemetry', 'device', 'algo'},
    'testing': {'core'},
}
# Sub-folders built into libraries of their own, over the public API only (they may include their own files).
PUBLIC_ONLY = {'bootstrap/mpi'}
# Third-party headers and where they may appear (path prefixes under src/).
FOREIGN = [
    (re.compile(r'#include\s*[<"]mpi\.h[>"]'), ('bootstrap/mpi/', 'tools/')),
    (re.compile(r'#include\s*<cuda[a-z_]*\.h>'), ('device/', 'transport/cuda_ipc/', 'transport/staging/', 'tools/',
                                                 'nccl_compat/')),
    (re.compile(r'#include\s*<(ucp|uct|ucs)/'), ('transport/ucx/', 'transport/failover/', 'tools/info/')),
    (re.compile(r'#include\s*<infiniband/'), ('transport/failover/',)),
]
INCLUDE = re.compile(r'^\s*#\s*include\s+"([a-z_]+)/')


def main(root):
    src = os.path.join(root, 'src')
    bad = []
    for dirpath, _, files in os.walk(src):
        for name in sorted(files):
            if not name.endswith(('.c', '.cc', '.h', '.cu', '.cuh')):
                continue
            path = os.path.join(dirpath, name)
            rel = os.path.relpath(path, src)
            layer = rel.split(os.sep)[0]
            if layer not in ALLOWED:
                bad.append('%s: folder %s is not a layer of docs/ARCHITECTURE.md' % (rel, layer))
                continue
            public_only = any(rel.startswith(p + os.sep) for p in PUBLIC_ONLY)
            with open(path, errors='replace') as f:
                for lineno, line in enumerate(f, 1):
                    m = INCLUDE.match(line)
                    if m:
                        used = m.group(1)
                        if public_only and not line.strip().startswith('#include "%s/' % rel.split(os.sep)[0]):
                            bad.append('%s:%d: %s uses only the public API, not %s/' % (rel, lineno, os.path.dirname(rel), used))
                        elif public_only:
                            target = line.split('"')[1]
                            if not any(target.startswith(p + '/') for p in PUBLIC_ONLY):
                                bad.append('%s:%d: %s uses only the public API, not %s' % (rel, lineno, os.path.dirname(rel), target))
                        elif used != layer and used not in ALLOWED[layer]:
                            bad.append('%s:%d: %s/ may not include %s/ (%s)' % (rel, lineno, layer, used, line.strip()))
                    for pattern, places in FOREIGN:
                        if pattern.search(line) and not rel.startswith(places):
                            bad.append('%s:%d: %s belongs in %s' % (rel, lineno, line.strip(), ', '.join(places)))
    for b in bad:
        print(b)
    print('%d layering violation(s)' % len(bad))
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), '..', '..')))
