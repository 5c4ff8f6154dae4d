#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Fails when an environment variable declared in src/core/env_defs.h is not documented in man/vccl.7.md
# (or in the shipped nroff page man/vccl.7), or when a launch script of contrib/slurm or contrib/megatron reads a
# VCCL_* variable the registry lacks. Fix: contrib/gen-env-man.sh, then regenerate man/vccl.7.
# Reads $top_srcdir (exported by make check); defaults to the directory above this script.
set -u

top=${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}
defs="$top/src/core/env_defs.h"
status=0
for f in "$defs" "$top/man/vccl.7.md" "$top/man/vccl.7"; do
    [ -r "$f" ] || { echo "check-man-env: cannot read $f" >&2; exit 99; }
done

# Names of all VCCL_ENV_DEF entries: join the file into one line (an entry may span lines), drop C
# comments, take the string after the id.
names=$(tr '\n' ' ' < "$defs" | sed 's|/\*\([^*]\|\*[^/]\)*\*/||g' |
        grep -o 'VCCL_ENV_DEF( *[A-Za-z0-9_]* *, *"VCCL_[A-Z0-9_]*"' | sed 's/.*"\(VCCL_[A-Z0-9_]*\)"/\1/')
if [ -z "$names" ]; then
    echo "check-man-env: found no VCCL_ENV_DEF entries in $defs" >&2
    exit 99
fi

count=0
for name in $names; do
    count=$((count + 1))
    # Each variable needs its own entry of the ENVIRONMENT list, "**VCCL\_NAME** (type, default ...)" as
    # contrib/gen-env-man.sh writes it (underscores escaped), not just a mention somewhere.
    escaped=$(printf '%s' "$name" | sed 's/_/\\_/g')
    if ! grep -qF "**$escaped** (" "$top/man/vccl.7.md"; then
        echo "check-man-env: $name is declared in src/core/env_defs.h but missing from man/vccl.7.md" >&2
        status=1
    fi
    if ! sed 's/\\//g' "$top/man/vccl.7" | grep -qF "$name"; then
        echo "check-man-env: $name is missing from the generated man/vccl.7 (regenerate it with pandoc)" >&2
        status=1
    fi
done
# The launch scripts an operator runs (contrib/slurm, contrib/megatron) read VCCL_* variables too: each must
# be declared in the registry, so that vccl-info -c and vccl(7) list it.
for script in "$top"/contrib/slurm/*.sh "$top"/contrib/megatron/*.sh; do
    [ -r "$script" ] || continue
    for used in $(grep -o 'VCCL_[A-Z0-9_]*[A-Z0-9]' "$script" | sort -u); do
        if ! printf '%s\n' $names | grep -qx "$used"; then
            echo "check-man-env: $used is read by ${script#"$top"/} but not declared in src/core/env_defs.h" >&2
            status=1
        fi
    done
done
[ $status = 0 ] && echo "check-man-env: all $count variables of env_defs.h are documented in vccl(7)"
exit $status
