#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# a failing vccl call reaches the MPI error handler, under Open MPI (see run-pmpi.sh)
exec "$(dirname "$0")/run-pmpi.sh" openmpi 2 errors
