#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# test_pmpi under Open MPI with VCCL_PMPI=0: loaded, everything passed on (see run-pmpi.sh)
exec "$(dirname "$0")/run-pmpi.sh" openmpi 2 off
