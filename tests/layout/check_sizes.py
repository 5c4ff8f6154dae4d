#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Small files with one job (docs/CONTRIBUTING.md): no source file under src/ over MAX_FILE lines and no function
over MAX_FUNCTION lines. Functions are found by their braces: a line that ends a signature with `{` opens one,
and its matching `}` closes it. Prints each offender; exit status 1 when there is one."""
import os
import re
import sys

MAX_FILE = 800
MAX_FUNCTION = 150
CONTROL = re.compile(r'^\s*(if|for|while|switch|else|do|try|catch|namespace|struct|class|union|enum|extern)\b')


def strip_code(lines):
    """The lines with comments and string/char literals blanked, so braces in them do not count."""
    out, in_comment = [], False
    for line in lines:
        s = line
        if in_comment:
            if '*/' not in s:
                out.append('')
                continue
            s = s.split('*/', 1)[1]
            in_comment = False
        s = re.sub(r'"(\\.|[^"\\])*"', '""', s)
        s = re.sub(r"'(\\.|[^'\\])*'", "''", s)
        s = re.sub(r'/\*.*?\*/', '', s)
        if '/*' in s:
            s, in_comment = s.split('/*', 1)[0], True
        out.append(s.split('//', 1)[0])
    return out


def functions(lines):
    code = strip_code(lines)
    i = 0
    while i < len(code):
        l = code[i].rstrip()
        opens = l.endswith('{') and ('(' in l or ')' in l) and not CONTROL.match(l) \
            and '=' not in l.split('(')[0] and not l.strip().startswith(('[', '}', ':', '.'))
        if not opens:
            i += 1
            continue
        depth, j, seen = 0, i, False
        while j < len(code):
            depth += code[j].count('{') - code[j].count('}')
            seen = seen or '{' in code[j]
            if seen and depth <= 0:
                break
            j += 1
        yield i + 1, j - i + 1, lines[i].strip()
        i += 1


def main(root):
    src = os.path.join(root, 'src')
    bad = []
    for dirpath, _, files in os.walk(src):
        for name in sorted(files):
            if not name.endswith(('.c', '.cc', '.h', '.cu', '.cuh')):
                continue
            path = os.path.join(dirpath, name)
            rel = os.path.relpath(path, root)
            with open(path, errors='replace') as f:
                lines = f.read().split('\n')
            if len(lines) > MAX_FILE:
                bad.append('%s: %d lines (at most %d)' % (rel, len(lines), MAX_FILE))
            for line, length, text in functions(lines):
                if length > MAX_FUNCTION:
                    bad.append('%s:%d: a function of %d lines (at most %d): %s' % (rel, line, length, MAX_FUNCTION, text[:80]))
    for b in bad:
        print(b)
    print('%d file(s) or function(s) over the limits' % len(bad))
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), '..', '..')))
