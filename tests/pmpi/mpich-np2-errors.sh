#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# a failing vccl call reaches the MPI error handler, under MPICH (see run-pmpi.sh)
exec "$(dirname "$0")/run-pmpi.sh" mpich 2 errors
