#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Builds the libFuzzer targets of tests/fuzz/ with clang++ -fsanitize=fuzzer,address,undefined, compiling the
# vccl sources they need directly (no libtool, no configure): build.sh [OUTDIR] (default: build-fuzz/).
# Needs clang++ with libFuzzer (Debian: clang, libclang-rt-14-dev) and libhwloc-dev.
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:-$top/build-fuzz}
mkdir -p "$out/obj"
CXX=${FUZZ_CXX:-clang++}
jobs=${JOBS:-2}
# -fno-sanitize=enum: hwloc stores whatever an XML file says in its enum fields (e.g. bridge_type "2-1" gives
# an hwloc_obj_bridge_type_t of 2); vccl only compares them with the valid values, which is fine in practice.
flags=(-std=c++17 -g -O1 -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize=enum -fno-sanitize-recover=all
       -I"$top/include" -I"$top/src" $(pkg-config --cflags hwloc 2>/dev/null || true))
libs=($(pkg-config --libs hwloc 2>/dev/null || echo -lhwloc) -lpthread)

# The layers the targets reach: core, topology, bootstrap (TCP wire and unique id), the host algorithm registry
# (the device registry, whose algorithms pull in the whole device path, is stood in for by stubs.cc), and the
# telemetry ring with vccl-telemetry's reader and exposition of it.
sources=("$top"/src/core/*.cc "$top"/src/topo/*.cc "$top"/src/bootstrap/tcp/unique_id.cc
         "$top"/src/bootstrap/tcp/socket_util.cc "$top"/src/algo/registry.cc "$top"/src/algo/host/coll_ctx.cc
         "$top"/src/algo/host/*/*.cc "$top"/src/algo/host_groups.cc "$top"/src/algo/twolevel/*.cc
         "$top"/src/algo/twolevel/*/*.cc
         "$top"/tests/fuzz/stubs.cc
         "$top"/src/telemetry/ring.cc "$top"/src/tools/telemetry/rings.cc "$top"/src/tools/telemetry/metrics.cc)
objs=()
for s in "${sources[@]}"; do
    rel=${s#"$top"/}
    objs+=("$out/obj/${rel//\//_}.o")
done
# Compile in parallel (make-like: only what is out of date; a failed compile leaves no object and ar fails).
i=0
for s in "${sources[@]}"; do
    o=${objs[$i]}
    i=$((i + 1))
    if [ ! -f "$o" ] || [ "$s" -nt "$o" ]; then
        echo "  CXX      ${s#"$top"/}"
        "$CXX" "${flags[@]}" -fsanitize=fuzzer-no-link -c "$s" -o "$o" &
        while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n; done
    fi
done
wait
rm -f "$out/libvccl_fuzz.a"
ar rcs "$out/libvccl_fuzz.a" "${objs[@]}"

targets=${FUZZ_TARGETS:-$(cd "$top/tests/fuzz" && ls fuzz_*.cc | sed 's/\.cc$//')}
for t in $targets; do
    echo "  LINK     $t"
    "$CXX" "${flags[@]}" -fsanitize=fuzzer "$top/tests/fuzz/$t.cc" "$out/libvccl_fuzz.a" "${libs[@]}" -o "$out/$t" &
    while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n; done
done
wait
for t in $targets; do [ -x "$out/$t" ] || { echo "build.sh: $t was not built" >&2; exit 1; }; done
