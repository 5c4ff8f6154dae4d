#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# test_pmpi under Open MPI at 4 ranks, host buffers through vccl (see run-pmpi.sh)
exec "$(dirname "$0")/run-pmpi.sh" openmpi 4 host
