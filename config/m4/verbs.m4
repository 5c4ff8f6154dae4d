# SPDX-License-Identifier: BSD-3-Clause
# VCCL_CHECK_VERBS: libibverbs (optional) for port events and counters. Defines VCCL_HAVE_VERBS 0/1.
AC_DEFUN([VCCL_CHECK_VERBS], [
  AC_ARG_WITH([verbs], [AS_HELP_STRING([--with-verbs], [use libibverbs (default: when found)])], [], [with_verbs=check])
  vccl_have_verbs=0
  VERBS_LIBS=""
  AS_IF([test "x$with_verbs" != xno], [
    AC_CHECK_HEADER([infiniband/verbs.h], [AC_CHECK_LIB([ibverbs], [ibv_get_device_list],
                    [vccl_have_verbs=1; VERBS_LIBS="-libverbs"])])
    AS_IF([test $vccl_have_verbs = 0 && test "x$with_verbs" = xyes], [AC_MSG_ERROR([libibverbs not found])])
  ])
  AS_IF([test $vccl_have_verbs = 1], [vccl_verbs_summary="yes"], [vccl_verbs_summary="no"])
  AC_DEFINE_UNQUOTED([VCCL_HAVE_VERBS], [$vccl_have_verbs], [Define to 1 when built with libibverbs])
  AM_CONDITIONAL([HAVE_VERBS], [test $vccl_have_verbs = 1])
  AC_SUBST([VERBS_LIBS])
])
