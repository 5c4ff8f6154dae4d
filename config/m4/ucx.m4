# SPDX-License-Identifier: BSD-3-Clause
# VCCL_CHECK_UCX: UCX (required). --with-ucx=DIR or pkg-config ucx.
AC_DEFUN([VCCL_CHECK_UCX], [
  AC_ARG_WITH([ucx], [AS_HELP_STRING([--with-ucx=DIR], [UCX installation (default: pkg-config ucx)])], [], [with_ucx=check])
  AS_IF([test "x$with_ucx" = xno], [AC_MSG_ERROR([UCX is required: it is vccl's data path])])
  AS_IF([test "x$with_ucx" != xcheck && test "x$with_ucx" != xyes],
        [UCX_CFLAGS="-I$with_ucx/include"; UCX_LIBS="-L$with_ucx/lib -lucp -luct -lucs"],
        [PKG_CHECK_MODULES([UCX], [ucx], [], [UCX_CFLAGS=""; UCX_LIBS="-lucp -luct -lucs"])])
  vccl_save_CPPFLAGS="$CPPFLAGS"; vccl_save_LIBS="$LIBS"
  CPPFLAGS="$CPPFLAGS $UCX_CFLAGS"; LIBS="$LIBS $UCX_LIBS"
  AC_CHECK_HEADER([ucp/api/ucp.h], [], [AC_MSG_ERROR([UCX headers not found (Debian: apt-get install libucx-dev)])])
  AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <ucp/api/ucp.h>]], [[ucp_get_version_string();]])], [],
                 [AC_MSG_ERROR([cannot link with UCX ($UCX_LIBS)])])
  CPPFLAGS="$vccl_save_CPPFLAGS"; LIBS="$vccl_save_LIBS"
  vccl_ucx_summary="yes ($UCX_LIBS)"
  AC_SUBST([UCX_CFLAGS])
  AC_SUBST([UCX_LIBS])
])
