#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# LOG_COMPILER of the ASan unit-test run (contrib/ci/sanitizers.sh): runs one test program with
# $VCCL_ASAN_PRELOAD prepended to LD_PRELOAD. hwloc dlcloses its PCI plugin (and libpciaccess) before exit,
# which leaves their leaks with no module name for contrib/ci/lsan.supp to match; preloading the plugin keeps
# it mapped. Only the test process gets the preload (make and the shell would otherwise run with the ASan
# runtime and report their own leaks).
if [ -n "${VCCL_ASAN_PRELOAD:-}" ]; then
    LD_PRELOAD="$VCCL_ASAN_PRELOAD${LD_PRELOAD:+:$LD_PRELOAD}"
    export LD_PRELOAD
fi
exec "$@"
