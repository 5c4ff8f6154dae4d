# SPDX-License-Identifier: BSD-3-Clause
# AX_CXX_STD17: require a C++17 compiler and add -std=c++17 when the compiler does not default to it.
AC_DEFUN([AX_CXX_STD17], [
  AC_MSG_CHECKING([whether $CXX supports C++17])
  vccl_save_CXXFLAGS="$CXXFLAGS"
  CXXFLAGS="$CXXFLAGS -std=c++17"
  AC_COMPILE_IFELSE([AC_LANG_PROGRAM([[#include <optional>]], [[std::optional<int> x; (void)x;]])],
    [AC_MSG_RESULT([yes])],
    [AC_MSG_RESULT([no]); AC_MSG_ERROR([a C++17 compiler is required])])
  CXXFLAGS="$vccl_save_CXXFLAGS"
  AM_CXXFLAGS_STD="-std=c++17"
  AC_SUBST([AM_CXXFLAGS_STD])
])
