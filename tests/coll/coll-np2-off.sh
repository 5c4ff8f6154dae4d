#!/bin/sh
# test_coll under mpirun with coll_vccl_priority=-1 (see run-coll.sh)
exec "$(dirname "$0")/run-coll.sh" 2 off
