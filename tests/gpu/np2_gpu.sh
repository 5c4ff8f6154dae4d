#!/bin/sh
# Listed in tests/gpu/Makefile.inc: test_gpu on 2 ranks, one GPU each when there are two.
exec "$(dirname "$0")/run-gpu-test.sh" 2 "${top_builddir:-.}/tests/gpu/test_gpu" "$@"
