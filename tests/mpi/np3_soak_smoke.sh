#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Listed in tests/mpi/Makefile.inc: a 20-second soak (contrib/soak.sh, vccl-perf --soak) on 3 ranks: random
# collectives, datatypes, ops and sizes, every result checked, communicator splits; fails on any wrong
# element, error, any growth of open descriptors, or RSS growth above 64 MB per rank. The RSS limit is wider
# than vccl-perf's default (16 MB): the warm-up of a 20-second run is 2 s, and RSS rises by 11-14 MB over the
# first 30 s of a soak (docs/RELIABILITY.md), so leaks are for the long soaks to find. The seed is random and
# printed: rerun with `contrib/soak.sh --seconds 20 --np 3 -- --seed N` to reproduce.
top=${top_srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}
exec "$top/contrib/soak.sh" --seconds 20 --np 3 --perf "${top_builddir:-.}/vccl-perf" -- --max-rss-growth 65536
