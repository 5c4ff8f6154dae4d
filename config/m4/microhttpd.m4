# SPDX-License-Identifier: BSD-3-Clause
# VCCL_CHECK_MICROHTTPD: libmicrohttpd (optional), the HTTP server of vccl-telemetry serve; pkg-config
# libmicrohttpd, or --with-microhttpd=DIR. --without-microhttpd builds serve with --print only.
AC_DEFUN([VCCL_CHECK_MICROHTTPD], [
  AC_ARG_WITH([microhttpd], [AS_HELP_STRING([--with-microhttpd=DIR], [libmicrohttpd for vccl-telemetry serve (default: when found)])],
              [], [with_microhttpd=check])
  vccl_have_microhttpd=0
  AS_IF([test "x$with_microhttpd" != xno],
        [AS_IF([test "x$with_microhttpd" != xcheck && test "x$with_microhttpd" != xyes],
               [MICROHTTPD_CFLAGS="-I$with_microhttpd/include"; MICROHTTPD_LIBS="-L$with_microhttpd/lib -lmicrohttpd"],
               [PKG_CHECK_MODULES([MICROHTTPD], [libmicrohttpd >= 0.9.71], [],
                                  [MICROHTTPD_CFLAGS=""; MICROHTTPD_LIBS="-lmicrohttpd"])])
         vccl_save_CPPFLAGS="$CPPFLAGS"; CPPFLAGS="$CPPFLAGS $MICROHTTPD_CFLAGS"
         vccl_save_LIBS="$LIBS"; LIBS="$LIBS $MICROHTTPD_LIBS"
         AC_MSG_CHECKING([for libmicrohttpd 0.9.71 or later])
         AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <microhttpd.h>
#if MHD_VERSION < 0x00097100
#error too old
#endif]], [[return MHD_start_daemon(0, 0, 0, 0, 0, 0, MHD_OPTION_END) != 0;]])],
                        [vccl_have_microhttpd=1; AC_MSG_RESULT([yes])], [AC_MSG_RESULT([no])])
         CPPFLAGS="$vccl_save_CPPFLAGS"; LIBS="$vccl_save_LIBS"
         AS_IF([test $vccl_have_microhttpd = 0 && test "x$with_microhttpd" != xcheck],
               [AC_MSG_ERROR([libmicrohttpd 0.9.71+ not found (Debian: apt-get install libmicrohttpd-dev)])])])
  AS_IF([test $vccl_have_microhttpd = 1],
        [vccl_microhttpd_summary="yes (vccl-telemetry serve)"],
        [vccl_microhttpd_summary="no (vccl-telemetry serve --print only; Debian: libmicrohttpd-dev)"])
  AM_CONDITIONAL([HAVE_MICROHTTPD], [test $vccl_have_microhttpd = 1])
  AC_SUBST([MICROHTTPD_CFLAGS])
  AC_SUBST([MICROHTTPD_LIBS])
])
