#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# test_coll under mpirun with coll_vccl_priority=-1 (see run-coll.sh)
exec "$(dirname "$0")/run-coll.sh" 2 off
