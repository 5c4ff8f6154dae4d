#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Regenerates the committed outputs of the documents, so that builds need neither Graphviz nor pandoc:
# docs/architecture.svg from docs/architecture.dot (Graphviz's dot), and man/*.[137] from man/*.md (pandoc), and the
# environment table of man/vccl.7.md from src/core/env_defs.h (contrib/gen-env-man.sh).
#   contrib/gen-docs.sh            # all of them
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
contrib/gen-env-man.sh
if command -v dot >/dev/null; then
    dot -Tsvg docs/architecture.dot -o docs/architecture.svg
else
    echo "gen-docs.sh: dot (Debian package graphviz) not found: docs/architecture.svg left as it is" >&2
fi
if command -v pandoc >/dev/null; then
    for md in man/*.md; do pandoc -s -t man "$md" -o "${md%.md}"; done
else
    echo "gen-docs.sh: pandoc not found: man pages left as they are" >&2
fi
