# SPDX-License-Identifier: BSD-3-Clause
# VCCL_CHECK_GTEST: GoogleTest from Debian's libgtest-dev (headers and static libraries). Unit tests are
# built only when it is found.
AC_DEFUN([VCCL_CHECK_GTEST], [
  PKG_CHECK_MODULES([GTEST], [gtest], [vccl_have_gtest=1], [vccl_have_gtest=0])
  AS_IF([test $vccl_have_gtest = 0], [
    AC_CHECK_HEADER([gtest/gtest.h], [vccl_have_gtest=1; GTEST_CFLAGS=""; GTEST_LIBS="-lgtest -lpthread"])])
  AS_IF([test $vccl_have_gtest = 1], [vccl_gtest_summary="yes"], [vccl_gtest_summary="no (apt-get install libgtest-dev)"])
  AM_CONDITIONAL([HAVE_GTEST], [test $vccl_have_gtest = 1])
  AC_SUBST([GTEST_CFLAGS])
  AC_SUBST([GTEST_LIBS])
])
