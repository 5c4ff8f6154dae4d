#!/bin/sh
# test_coll under mpirun (see run-coll.sh)
exec "$(dirname "$0")/run-coll.sh" 3 disabled
