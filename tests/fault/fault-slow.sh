#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# (c) rail0 throttled to 100 Mbit/s for 3 s: slower, never wrong, no error.
. "$(dirname "$0")/fault-common.sh"
vf_start 8 || { vf_finish; vf_check ok; }
vf_at_ms 2000 vf_slow rail0
vf_at_ms 5000 vf_unslow rail0
vf_finish
vf_check ok
