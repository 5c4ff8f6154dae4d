# SPDX-License-Identifier: BSD-3-Clause
# VCCL_CHECK_HWLOC: hwloc 2.x (required), pkg-config hwloc or --with-hwloc=DIR.
AC_DEFUN([VCCL_CHECK_HWLOC], [
  AC_ARG_WITH([hwloc], [AS_HELP_STRING([--with-hwloc=DIR], [hwloc installation])], [], [with_hwloc=check])
  AS_IF([test "x$with_hwloc" = xno], [AC_MSG_ERROR([hwloc is required for topology discovery])])
  AS_IF([test "x$with_hwloc" != xcheck && test "x$with_hwloc" != xyes],
        [HWLOC_CFLAGS="-I$with_hwloc/include"; HWLOC_LIBS="-L$with_hwloc/lib -lhwloc"],
        [PKG_CHECK_MODULES([HWLOC], [hwloc >= 2.0], [], [HWLOC_CFLAGS=""; HWLOC_LIBS="-lhwloc"])])
  vccl_save_CPPFLAGS="$CPPFLAGS"; CPPFLAGS="$CPPFLAGS $HWLOC_CFLAGS"
  AC_CHECK_HEADER([hwloc.h], [], [AC_MSG_ERROR([hwloc headers not found (Debian: apt-get install libhwloc-dev)])])
  CPPFLAGS="$vccl_save_CPPFLAGS"
  vccl_hwloc_summary="yes"
  AC_SUBST([HWLOC_CFLAGS])
  AC_SUBST([HWLOC_LIBS])
])
