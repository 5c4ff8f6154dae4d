#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Runs a multi-rank test program under mpirun: run-mpi-test.sh NP BINARY [args...]
#
# - $MPIRUN (default: mpirun) with the project's fixed flags; a hard limit of $VCCL_TEST_HARD_TIMEOUT
#   seconds (default 300) for the whole job.
# - Rank 0 writes gtest's XML to $top_builddir/test-results/<binary>-np<NP>.xml (top_builddir defaults to
#   the current directory); a stale report is removed first so that a crash leaves none.
# - The exit status is the test's (124 when the hard limit killed it).
# - Prints "VCCL_TEST_XML: <path>" so that contrib/ci/summarize-tests.sh can tie the automake log to it.
if [ $# -lt 2 ]; then
    echo "usage: $0 NP BINARY [args...]" >&2
    exit 99
fi
np=$1
binary=$2
shift 2

case "$binary" in
    */*) ;;
    *) binary=./$binary ;;
esac
if [ ! -x "$binary" ]; then
    echo "run-mpi-test.sh: $binary: not an executable (was it built? make check builds it)" >&2
    exit 99
fi

results=${top_builddir:-.}/test-results
mkdir -p "$results" || exit 99
name=$(basename "$binary")
xml=$results/$name-np$np.xml
rm -f "$xml"
GTEST_OUTPUT=xml:$xml
: "${GTEST_COLOR:=no}"
export GTEST_OUTPUT GTEST_COLOR
echo "VCCL_TEST_XML: $xml"

: "${MPIRUN:=mpirun}"
hard=${VCCL_TEST_HARD_TIMEOUT:-300}
start=$(date +%s)
timeout -k 10 "$hard" $MPIRUN --allow-run-as-root --oversubscribe --bind-to none --mca pml ob1 \
    --mca btl self,vader -np "$np" "$binary" "$@"
rc=$?
end=$(date +%s)
if [ $((end - start)) -ge "$hard" ]; then
    echo "run-mpi-test.sh: $name at np $np killed after ${hard} s (hard timeout)" >&2
fi
echo "run-mpi-test.sh: $name np=$np exit=$rc time=$((end - start))s"
exit $rc
