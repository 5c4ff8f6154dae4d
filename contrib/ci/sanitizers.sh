#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Builds vccl under a sanitizer in BUILD_DIR and runs the tests that make sense there:
#   contrib/ci/sanitizers.sh asan|tsan BUILD_DIR
# asan: AddressSanitizer + UndefinedBehaviorSanitizer (-fno-sanitize-recover: a finding fails its test), with
#       LeakSanitizer on, minus the leaks of Open MPI/UCX/hwloc (contrib/ci/lsan.supp); runs every unit test
#       and the multi-rank tests of ASAN_MPI_TESTS.
# tsan: ThreadSanitizer (contrib/ci/tsan.supp hides races inside MPI and UCX); runs the threaded tests: the
#       bootstrap unit tests, test_algo's threaded simulation (without AlgoGrid and most two-level checks), test_core (IdleProgress) and the 2-rank tests of
#       TSAN_MPI_TESTS.
# Both configure --without-cuda (no device code to instrument on CI machines; saves the nvcc probe and build).
# Results go to BUILD_DIR/test-results and BUILD_DIR/tests/**/*.trs for contrib/ci/summarize-tests.sh.
# Exit status: 0 when every selected test passed.
set -uo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
kind=${1:?usage: sanitizers.sh asan|tsan BUILD_DIR}
build=${2:?usage: sanitizers.sh asan|tsan BUILD_DIR}
jobs=${JOBS:-2}
unit_all="tests/unit/test_core tests/unit/test_reduce tests/unit/test_algo tests/unit/test_bootstrap tests/unit/test_topo"
case $kind in
asan)
    sanitizers=address,undefined
    mpi_tests=${ASAN_MPI_TESTS:-"tests/mpi/np2_collectives.sh tests/mpi/np2_p2p.sh tests/mpi/np3_p2p.sh tests/mpi/np2_comm.sh tests/mpi/np2_bad_input.sh"}
    unit_tests=$unit_all
    asan_base=abort_on_error=1:detect_stack_use_after_return=1:check_initialization_order=1
    # LeakSanitizer on for the unit tests. Not under mpirun: at exit its tracer crashes in Open MPI processes
    # ("LeakSanitizer has encountered a fatal error"), which would fail every multi-rank test.
    unit_env=(ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:$asan_base})
    mpi_env=(ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0:$asan_base})
    # hwloc dlcloses its PCI plugin (and libpciaccess) before exit, so their leaks have no module name left to
    # suppress: keep the plugin loaded (after the ASan runtime, which must come first).
    plugin=$(ls /usr/lib/*/hwloc/hwloc_pci.so 2>/dev/null | head -n 1)
    # contrib/ci/asan-unit.sh applies it to the test programs only.
    [ -n "$plugin" ] && unit_env+=("VCCL_ASAN_PRELOAD=$(${CC:-gcc} -print-file-name=libasan.so):$plugin")
    unit_make_args=("LOG_COMPILER=$top/contrib/ci/asan-unit.sh")
    # -O1 as ASan's documentation advises; line tables only (-g1): reports keep file and line, and the build
    # takes half the time of -g -O2 under ASan+UBSan.
    opt_flags="-g1 -O1"
    export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$top/contrib/ci/lsan.supp:print_suppressions=0}
    export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
    ;;
tsan)
    sanitizers=thread
    mpi_tests=${TSAN_MPI_TESTS:-"tests/mpi/np2_p2p.sh"}
    unit_tests="tests/unit/test_bootstrap tests/unit/test_algo tests/unit/test_core"
    # test_algo's threaded parts: AlgoStress (every algorithm, ranks as threads with random delays), AlgoChecker,
    # CollCtx, the two-level algorithms with random delays on every host shape and checked on two (2x2, 2+1).
    # AlgoGrid (the same algorithms over every size and type) takes 6-7 minutes under TSan on 2 cores, the two-level
    # checks on the other eight shapes about 2: they run under ASan instead.
    two_level=All/AlgoTwoLevel.MatchesReference
    skipped_shapes=""
    for shape in 1x4 2x1 2x2_interleaved 2x3 3plus1 3x2 3x2_scattered 4x4; do
        skipped_shapes="$skipped_shapes:$two_level/*_$shape"
    done
    unit_env=("GTEST_FILTER=${TSAN_GTEST_FILTER:--All/AlgoGrid.*$skipped_shapes}")
    mpi_env=()
    unit_make_args=()
    opt_flags="-g1 -O2" # line tables keep the reports' file and line; full debug info only slows the build
    # UCX's memory hooks (libucm patches madvise/mmap) run inside glibc's thread exit, after TSan dropped the
    # thread's state: every exiting thread crashed in ucm_event_enter. Tests here need no memory events.
    export UCX_MEM_MMAP_HOOK_MODE=none UCX_MEM_MALLOC_HOOKS=no
    export TSAN_OPTIONS=${TSAN_OPTIONS:-suppressions=$top/contrib/ci/tsan.supp:halt_on_error=1:second_deadlock_stack=1:report_signal_unsafe=0}
    ;;
*)
    echo "sanitizers.sh: unknown kind $kind (asan or tsan)" >&2
    exit 2
    ;;
esac
# Multi-rank tests run slower under a sanitizer: give the hard limit and the per-test watchdog some room
# (a hang still ends the job, later).
export VCCL_TEST_HARD_TIMEOUT=${VCCL_TEST_HARD_TIMEOUT:-600}
export VCCL_TEST_TIMEOUT_S=${VCCL_TEST_TIMEOUT_S:-400}

tests="$unit_tests $mpi_tests"
# Only the programs of the selected tests are built (check_PROGRAMS overridden), besides the libraries.
progs=""
for t in $tests; do
    case $t in
    tests/mpi/np*_*.sh) p=${t#tests/mpi/np}; p=tests/mpi/test_${p#*_}; p=${p%.sh} ;;
    *) p=$t ;;
    esac
    case " $progs " in *" $p "*) ;; *) progs="$progs $p" ;; esac
done

cd "$top"
[ -x configure ] || ./autogen.sh >/dev/null
mkdir -p "$build"
cd "$build"
rm -rf test-results
mkdir -p test-results
if [ ! -f Makefile ]; then
    "$top/configure" --without-cuda --enable-sanitizers="$sanitizers" CFLAGS="$opt_flags" CXXFLAGS="$opt_flags" \
        >configure.out 2>&1 || {
        tail -n 30 configure.out
        exit 1
    }
fi
echo "sanitizers.sh: $kind: building libraries and$progs"
make -j"$jobs" libvccl_core.la libvccl.la >build.out 2>&1 &&
    make -j"$jobs" check TESTS= check_PROGRAMS="$progs" bin_PROGRAMS= >>build.out 2>&1 || {
    tail -n 40 build.out
    exit 1
}
echo "sanitizers.sh: $kind: running$(printf ' %s' $tests)"
env "${unit_env[@]}" make -j1 check TESTS="$unit_tests" check_PROGRAMS="$progs" bin_PROGRAMS= "${unit_make_args[@]}" >check.out 2>&1
rc=$?
env "${mpi_env[@]}" make -j1 check TESTS="$mpi_tests" check_PROGRAMS="$progs" bin_PROGRAMS= >>check.out 2>&1
rc2=$?
[ $rc -eq 0 ] && rc=$rc2
tail -n 30 check.out
# Sanitizer reports, for the CI log.
grep -l -E "ERROR: (Address|Leak|Thread)Sanitizer|WARNING: ThreadSanitizer|runtime error:" $(find tests -name '*.log') 2>/dev/null |
    while read -r log; do
        echo "==== sanitizer report in $build/$log"
        grep -m 1 -A 30 -E "ERROR: (Address|Leak|Thread)Sanitizer|WARNING: ThreadSanitizer|runtime error:" "$log"
    done
exit $rc
