#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# ompi_info lists the five MCA parameters of coll/vccl (it honours only the environment variable).
set -u
: "${top_builddir:=$(cd "$(dirname "$0")/../.." && pwd)}"
command -v ompi_info >/dev/null 2>&1 || { echo "no ompi_info"; exit 77; }
ompi_dir=${VCCL_OMPI_COMPONENT_DIR:-/usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi3}
out=$(OMPI_MCA_mca_base_component_path="$top_builddir/coll_vccl/.libs:$ompi_dir" ompi_info --param coll vccl --level 9 2>&1)
echo "$out"
echo "$out" | grep -q 'MCA coll: vccl' || { echo "FAIL: component not listed"; exit 1; }
for p in priority enable verbose min_bytes host; do
    echo "$out" | grep -q "parameter \"coll_vccl_$p\"" || { echo "FAIL: coll_vccl_$p missing"; exit 1; }
done
echo "all five parameters listed"
