#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# test_coll under mpirun (see run-coll.sh)
exec "$(dirname "$0")/run-coll.sh" 4 vccl
