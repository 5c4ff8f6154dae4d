#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Every collective, checked, across emulated hosts of ranks "2 2" (hosts-check.sh). Exit 0 pass, 1 fail, 77 skip.
. "$(dirname "$0")/hosts-check.sh" "2 2"
