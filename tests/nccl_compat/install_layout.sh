#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Listed in tests/nccl_compat/Makefile.inc: the installed libvccl-nccl must never shadow NCCL. ldconfig names a
# link after the SONAME of every lib*.so* file it scans, so a file of vccl's with SONAME libnccl.so.2 directly
# in $libdir becomes $libdir/libnccl.so.2, found first by every program with $libdir in its search path.
# Installs the shim twice into a DESTDIR (over the links an older vccl left), runs `ldconfig -n` on $libdir as
# libtool and the system's ldconfig would, and checks: no libnccl.so* and no libvccl-nccl.so.2 in $libdir, the
# shim in $libdir/vccl/nccl, and a libnccl.so.2 that is not vccl's link left alone.
top=${top_builddir:-.}
make=${MAKE:-make}
fail() { echo "FAIL: $*"; exit 1; }
libdir=$(env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL "$make" -s -C "$top" -f Makefile -f - print-vccl-libdir <<'MK'
print-vccl-libdir: ; @echo '$(libdir)'
MK
) || exit 99
[ -n "$libdir" ] || exit 99
tmp=$(mktemp -d "${TMPDIR:-/tmp}/vccl-install.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT
dest=$tmp/root
lib=$dest$libdir
# Only the shim's own install targets: a whole `make install` relinks libvccl_mpi in place (libtool), which
# breaks the tests running beside this one. The shim links no other libtool library, so nothing is relinked.
install_once() {
    env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL "$make" -s -C "$top" install-vccl_nccllibLTLIBRARIES install-exec-local \
        DESTDIR="$dest" >"$tmp/install.log" 2>&1 || { cat "$tmp/install.log"; fail "make install (the shim) failed"; }
}
ldconfig_n() {
    for l in ldconfig /sbin/ldconfig /usr/sbin/ldconfig; do
        if command -v "$l" >/dev/null 2>&1; then "$l" -n "$lib" && return 0; fi
    done
    echo "note: no ldconfig here; checking the files as installed"
}

# What vccl before this fix left after two installs.
mkdir -p "$lib" || exit 99
ln -s vccl/nccl/libnccl.so.2 "$lib/libvccl-nccl.so.2"
ln -s libvccl-nccl.so.2 "$lib/libnccl.so.2"
install_once
install_once
[ -e "$lib/vccl/nccl/libnccl.so.2" ] || fail "the shim is not installed as $libdir/vccl/nccl/libnccl.so.2"
grep -q "removing stale link" "$tmp/install.log" && fail "the second install found stale links again"
ldconfig_n
for f in "$lib"/libnccl.so* "$lib"/libvccl-nccl.so*; do
    [ -e "$f" ] || [ -h "$f" ] || continue
    fail "$f is in \$libdir: programs searching $libdir for libnccl.so.2 would load vccl ($(ls -l "$f"))"
done
if command -v readelf >/dev/null 2>&1; then
    readelf -d "$lib/vccl/nccl/libnccl.so.2" | grep -q 'SONAME.*\[libnccl.so.2\]' || fail "the shim's SONAME is not libnccl.so.2"
fi
echo "ok: after two installs over stale links and ldconfig -n, $libdir holds no libnccl.so* and no libvccl-nccl.so*"

# NVIDIA's NCCL installed into the same prefix: a real file, not vccl's link. It stays.
echo "not vccl" >"$lib/libnccl.so.2"
install_once
[ -f "$lib/libnccl.so.2" ] && [ ! -h "$lib/libnccl.so.2" ] || fail "install removed a libnccl.so.2 that was not vccl's"
echo "ok: a libnccl.so.2 that is not vccl's link is left alone"
