#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Healthy baseline: two ranks in namespaces, traffic on rail0, no fault. Exit 0 pass, 1 fail, 77 skip.
. "$(dirname "$0")/fault-common.sh"
vf_start 6 || { vf_finish; vf_check ok; }
vf_finish
vf_check ok
