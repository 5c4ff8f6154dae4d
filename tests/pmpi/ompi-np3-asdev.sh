#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# test_pmpi under Open MPI, host buffers taken for device memory: the staging paths (see run-pmpi.sh)
exec "$(dirname "$0")/run-pmpi.sh" openmpi 3 asdev
