#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# test_coll under mpirun (see run-coll.sh); coll_vccl_min_bytes splits the calls between vccl and the
# previous module, whose results must agree.
EXPECT_FREED=0 exec "$(dirname "$0")/run-coll.sh" 3 vccl --mca coll_vccl_min_bytes 4096
