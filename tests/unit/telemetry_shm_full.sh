#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# A telemetry ring on a full /dev/shm must fall back to private memory, not die of SIGBUS in the data path.
# Runs test_telemetry's TelemetryShm cases in a private mount namespace whose /dev/shm is a 256 KiB tmpfs
# (the host's /dev/shm is not touched). Needs root and unshare; skips (77) without them.
builddir=${top_builddir:-.}
if [ "$(id -u)" != 0 ] || ! command -v unshare >/dev/null 2>&1; then
    echo "SKIP: needs root and unshare (util-linux) for a private /dev/shm"
    exit 77
fi
if ! unshare -m true 2>/dev/null; then
    echo "SKIP: unshare -m is not permitted here"
    exit 77
fi
exec unshare -m sh -c 'mount -t tmpfs -o size=256k tmpfs /dev/shm || { echo "SKIP: cannot mount a tmpfs"; exit 77; }
VCCL_TEST_SMALL_SHM=1 exec "$0" --gtest_filter="TelemetryShm.*"' "$builddir/tests/unit/test_telemetry"
