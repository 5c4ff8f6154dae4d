# SPDX-License-Identifier: BSD-3-Clause
# VCCL_CHECK_OMPI: Open MPI devel headers (ompi/mca/coll/coll.h) for the coll_vccl component; --with-ompi=DIR
# names the Open MPI include directory. Defines VCCL_HAVE_OMPI_DEVEL 0/1.
AC_DEFUN([VCCL_CHECK_OMPI], [
  AC_ARG_WITH([ompi], [AS_HELP_STRING([--with-ompi=DIR], [Open MPI prefix or include dir with devel headers])], [], [with_ompi=check])
  vccl_have_ompi=0
  OMPI_CPPFLAGS=""
  AS_IF([test "x$with_ompi" != xno && test $vccl_have_mpi = 1], [
    vccl_ompi_dirs=""
    vccl_ompi_dirs=`echo " $MPI_CPPFLAGS" | sed 's/ -I/ /g'`
    AS_CASE(["$with_ompi"], [yes|check], [], [vccl_ompi_dirs="$with_ompi/include/openmpi $with_ompi/include $with_ompi $vccl_ompi_dirs"])
    for d in $vccl_ompi_dirs; do
      AS_IF([test -f "$d/ompi/mca/coll/coll.h"], [vccl_have_ompi=1; OMPI_CPPFLAGS="-I$d $MPI_CPPFLAGS"; break])
    done
  ])
  AS_IF([test $vccl_have_ompi = 0 && test "x$with_ompi" != xcheck && test "x$with_ompi" != xno],
        [AC_MSG_ERROR([Open MPI devel headers (ompi/mca/coll/coll.h) not found])])
  AS_IF([test $vccl_have_ompi = 1], [vccl_ompi_summary="yes"], [vccl_ompi_summary="no"])
  AC_DEFINE_UNQUOTED([VCCL_HAVE_OMPI_DEVEL], [$vccl_have_ompi], [Define to 1 when Open MPI devel headers exist])
  AM_CONDITIONAL([HAVE_OMPI_DEVEL], [test $vccl_have_ompi = 1])
  AC_SUBST([OMPI_CPPFLAGS])
])
