#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# test_pmpi_gpu under MPICH on cudaMalloc buffers; skipped without a GPU (see run-pmpi.sh)
exec "$(dirname "$0")/run-pmpi.sh" mpich 2 device
