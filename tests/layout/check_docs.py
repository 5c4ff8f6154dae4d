#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""The repository speaks of the product only, and its documents point at files that exist:
  - no text file names a numbered run, a working session, an ordinal "Nth session", an issue number, or the
    gpu-carry folder of scripts that never were in the repository;
  - every contrib/, tests/, docs/, src/, man/ or include/ path that README.md, docs/*.md or man/*.md name exists.
Prints each finding with file and line; exit status 1 when there is one."""
import os
import re
import subprocess
import sys

JOURNAL = re.compile(r'\bsessions?\b|\brun[0-9]+|gpu-carry|\btwenty-|\bissue [0-9]+|\b(?:first|second|third|fourth|'
                     r'fifth|sixth|seventh|eighth|ninth|tenth|eleventh|twelfth|[a-z]+teenth)\s+session', re.I)
PATH = re.compile(r'(?<![\w./-])((?:contrib|tests|docs|src|man|include|coll_vccl|config)/[A-Za-z0-9_.+/-]*[A-Za-z0-9_])')
TEXT = ('.md', '.cc', '.h', '.c', '.cu', '.cuh', '.sh', '.py', '.inc', '.am', '.ac', '.m4', '.map', '.txt', '.dot',
        '.in', '.7', '.1', '.3', '.supp', '.json', '.xml')
SELF = {'tests/layout/check_docs.py'}


def tracked(root):
    try:
        out = subprocess.check_output(['git', '-C', root, 'ls-files'], stderr=subprocess.DEVNULL).decode()
        return [f for f in out.split('\n') if f]
    except (OSError, subprocess.CalledProcessError):
        files = []
        for dirpath, dirs, names in os.walk(root):
            dirs[:] = [d for d in dirs if not d.startswith(('.git', 'build'))]
            files += [os.path.relpath(os.path.join(dirpath, n), root) for n in names]
        return files


def main(root):
    bad = []
    files = tracked(root)
    for rel in files:
        base = os.path.basename(rel)
        if rel in SELF or not (rel.endswith(TEXT) or base in ('.gitignore', 'README', 'Makefile', 'run', 'LICENSE')):
            continue
        path = os.path.join(root, rel)
        if not os.path.isfile(path):
            continue
        with open(path, errors='replace') as f:
            for n, line in enumerate(f, 1):
                m = JOURNAL.search(line)
                if m:
                    bad.append('%s:%d: journal word "%s": %s' % (rel, n, m.group(0), line.strip()[:100]))
    docs = [f for f in files if f == 'README.md' or (f.startswith(('docs/', 'man/')) and f.endswith('.md'))]
    for rel in docs:
        with open(os.path.join(root, rel), errors='replace') as f:
            for n, line in enumerate(f, 1):
                for m in PATH.finditer(line):
                    p = m.group(1).rstrip('.')
                    if '<' in line[m.start():m.end() + 1] or '*' in p:
                        continue
                    # A test program names its source (tests/unit/test_algo: test_algo.cc).
                    if not any(os.path.exists(os.path.join(root, p + ext)) for ext in ('', '.cc', '.c', '.sh', '.md')):
                        bad.append('%s:%d: names %s, which does not exist' % (rel, n, p))
    for b in bad:
        print(b)
    print('%d finding(s)' % len(bad))
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), '..', '..')))
