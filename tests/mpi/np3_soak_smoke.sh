#!/bin/sh
# Listed in tests/mpi/Makefile.inc: a 20-second soak (contrib/soak.sh, vccl-perf --soak) on 3 ranks: random
# collectives, datatypes, ops and sizes, every result checked, communicator splits; fails on any wrong
# element, error, or growth of RSS or open descriptors above vccl-perf's default limits. The seed is random
# and printed: rerun with `contrib/soak.sh --seconds 20 --np 3 -- --seed N` to reproduce.
top=${top_srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}
exec "$top/contrib/soak.sh" --seconds 20 --np 3 --perf "${top_builddir:-.}/vccl-perf"
