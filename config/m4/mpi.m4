# SPDX-License-Identifier: BSD-3-Clause
# VCCL_CHECK_MPI: --with-mpi[=DIR] (default: use mpicc from PATH when found). Builds libvccl_mpi, the MPI
# bootstrap, vccl-perf's --baseline mpi and the multi-rank tests. Defines VCCL_HAVE_MPI 0/1.
AC_DEFUN([VCCL_CHECK_MPI], [
  AC_ARG_WITH([mpi], [AS_HELP_STRING([--with-mpi@<:@=DIR@:>@], [MPI (default: mpicc from PATH if found)])], [], [with_mpi=check])
  vccl_have_mpi=0
  MPI_CPPFLAGS=""; MPI_LIBS=""; MPIRUN=""
  AS_IF([test "x$with_mpi" != xno], [
    vccl_mpi_path="$PATH"
    AS_CASE(["$with_mpi"], [yes|check], [], [vccl_mpi_path="$with_mpi/bin:$PATH"])
    AC_PATH_PROG([MPICC], [mpicc], [], [$vccl_mpi_path])
    AC_PATH_PROG([MPIRUN], [mpirun], [], [$vccl_mpi_path])
    AS_IF([test -n "$MPICC"], [
      MPI_CPPFLAGS=`$MPICC --showme:compile 2>/dev/null || $MPICC -compile_info 2>/dev/null | cut -d' ' -f2-`
      MPI_CPPFLAGS="$MPI_CPPFLAGS -DOMPI_SKIP_MPICXX=1 -DMPICH_SKIP_MPICXX=1"
      MPI_LIBS=`$MPICC --showme:link 2>/dev/null || $MPICC -link_info 2>/dev/null | cut -d' ' -f2-`
      vccl_save_CPPFLAGS="$CPPFLAGS"; vccl_save_LIBS="$LIBS"
      CPPFLAGS="$CPPFLAGS $MPI_CPPFLAGS"; LIBS="$LIBS $MPI_LIBS"
      AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <mpi.h>]], [[MPI_Init(0, 0);]])], [vccl_have_mpi=1])
      CPPFLAGS="$vccl_save_CPPFLAGS"; LIBS="$vccl_save_LIBS"
    ])
    AS_IF([test $vccl_have_mpi = 0 && test "x$with_mpi" != xcheck],
          [AC_MSG_ERROR([MPI requested but mpicc was not found or does not work])])
  ])
  AS_IF([test $vccl_have_mpi = 1], [vccl_mpi_summary="yes ($MPICC)"], [vccl_mpi_summary="no"])
  AC_DEFINE_UNQUOTED([VCCL_HAVE_MPI], [$vccl_have_mpi], [Define to 1 when built with MPI])
  AM_CONDITIONAL([HAVE_MPI], [test $vccl_have_mpi = 1])
  AC_SUBST([MPI_CPPFLAGS])
  AC_SUBST([MPI_LIBS])
  AC_SUBST([MPIRUN])
])
