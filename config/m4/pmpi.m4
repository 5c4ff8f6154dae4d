# SPDX-License-Identifier: BSD-3-Clause
# VCCL_CHECK_PMPI: the PMPI interposition library (coll_vccl/pmpi, libvccl-pmpi.so), built once per MPI
# flavour found, since Open MPI and MPICH differ in ABI (MPI_Comm is a pointer in one, an int in the other):
#   openmpi  from --with-mpi's mpicc (VCCL_CHECK_MPI) when that is Open MPI
#   mpich    from --with-mpich[=DIR] (DIR/bin/mpicc), else mpicc.mpich on PATH (Debian installs MPICH so,
#            beside Open MPI), else --with-mpi's mpicc when that is MPICH
# --disable-pmpi builds none. Substitutes PMPI_OMPI_CPPFLAGS/LIBS, PMPI_MPICH_CPPFLAGS/LIBS and the launchers
# PMPI_OMPI_MPIRUN, PMPI_MPICH_MPIEXEC (for the tests). Only conditionals and substitutions: config.h is not
# touched, so adding an MPI does not rebuild the library.
AC_DEFUN([_VCCL_PMPI_FLAVOUR], [
  # $1 CPPFLAGS, $2 LIBS; sets vccl_pmpi_flavour to openmpi, mpich or none
  vccl_pmpi_flavour=none
  AC_LANG_PUSH([C])
  vccl_save_CPPFLAGS="$CPPFLAGS"; vccl_save_LIBS="$LIBS"
  CPPFLAGS="$CPPFLAGS $1"; LIBS="$2 $LIBS"
  AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <mpi.h>
#ifndef OMPI_MAJOR_VERSION
#error not Open MPI
#endif]], [[return PMPI_Init(0, 0);]])], [vccl_pmpi_flavour=openmpi])
  AS_IF([test $vccl_pmpi_flavour = none], [
    AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <mpi.h>
#ifndef MPICH_NUMVERSION
#error not MPICH
#endif]], [[return PMPI_Init(0, 0);]])], [vccl_pmpi_flavour=mpich])])
  CPPFLAGS="$vccl_save_CPPFLAGS"; LIBS="$vccl_save_LIBS"
  AC_LANG_POP([C])
])

AC_DEFUN([VCCL_CHECK_PMPI], [
  AC_ARG_ENABLE([pmpi], [AS_HELP_STRING([--disable-pmpi], [do not build the PMPI interposer libvccl-pmpi.so])],
                [], [enable_pmpi=yes])
  AC_ARG_WITH([mpich], [AS_HELP_STRING([--with-mpich@<:@=DIR@:>@],
              [MPICH (or an MPI of the MPICH ABI) for a second build of libvccl-pmpi.so (default: mpicc.mpich on PATH)])],
              [], [with_mpich=check])
  PMPI_OMPI_CPPFLAGS=""; PMPI_OMPI_LIBS=""; PMPI_OMPI_MPIRUN=""
  PMPI_MPICH_CPPFLAGS=""; PMPI_MPICH_LIBS=""; PMPI_MPICH_MPIEXEC=""
  vccl_pmpi_ompi=0; vccl_pmpi_mpich=0
  AS_IF([test "x$enable_pmpi" != xno], [
    AS_IF([test $vccl_have_mpi = 1], [
      AC_MSG_CHECKING([which MPI $MPICC is])
      _VCCL_PMPI_FLAVOUR([$MPI_CPPFLAGS], [$MPI_LIBS])
      AC_MSG_RESULT([$vccl_pmpi_flavour])
      AS_CASE([$vccl_pmpi_flavour],
        [openmpi], [vccl_pmpi_ompi=1; PMPI_OMPI_CPPFLAGS="$MPI_CPPFLAGS"; PMPI_OMPI_LIBS="$MPI_LIBS"
                    PMPI_OMPI_MPIRUN="$MPIRUN"],
        [mpich], [vccl_pmpi_mpich=1; PMPI_MPICH_CPPFLAGS="$MPI_CPPFLAGS"; PMPI_MPICH_LIBS="$MPI_LIBS"
                  PMPI_MPICH_MPIEXEC="$MPIRUN"])
    ])
    AS_IF([test "x$with_mpich" != xno && test $vccl_pmpi_mpich = 0], [
      vccl_mpich_cc=""; vccl_mpich_exec=""
      AS_CASE(["$with_mpich"],
        [yes|check], [AC_PATH_PROG([MPICH_CC], [mpicc.mpich], [])
                      AC_PATH_PROG([MPICH_MPIEXEC], [mpiexec.mpich], [])
                      vccl_mpich_cc="$MPICH_CC"; vccl_mpich_exec="$MPICH_MPIEXEC"],
        [AS_IF([test -x "$with_mpich/bin/mpicc"], [vccl_mpich_cc="$with_mpich/bin/mpicc"])
         AS_IF([test -x "$with_mpich/bin/mpiexec"], [vccl_mpich_exec="$with_mpich/bin/mpiexec"])])
      AS_IF([test -n "$vccl_mpich_cc"], [
        # MPICH's wrappers print the whole command line (compiler first): keep the flags that matter.
        vccl_mpich_cppflags=""; vccl_mpich_libs=""
        for f in `$vccl_mpich_cc -compile_info 2>/dev/null`; do
          AS_CASE(["$f"], [-I*|-D*], [vccl_mpich_cppflags="$vccl_mpich_cppflags $f"])
        done
        for f in `$vccl_mpich_cc -link_info 2>/dev/null`; do
          AS_CASE(["$f"], [-L*|-l*|-Wl,*], [vccl_mpich_libs="$vccl_mpich_libs $f"])
        done
        vccl_mpich_cppflags="$vccl_mpich_cppflags -DMPICH_SKIP_MPICXX=1"
        AC_MSG_CHECKING([which MPI $vccl_mpich_cc is])
        _VCCL_PMPI_FLAVOUR([$vccl_mpich_cppflags], [$vccl_mpich_libs])
        AC_MSG_RESULT([$vccl_pmpi_flavour])
        AS_IF([test $vccl_pmpi_flavour = mpich], [
          vccl_pmpi_mpich=1; PMPI_MPICH_CPPFLAGS="$vccl_mpich_cppflags"; PMPI_MPICH_LIBS="$vccl_mpich_libs"
          PMPI_MPICH_MPIEXEC="$vccl_mpich_exec"])
      ])
      AS_IF([test $vccl_pmpi_mpich = 0 && test "x$with_mpich" != xcheck],
            [AC_MSG_ERROR([MPICH requested (--with-mpich) but no working MPICH mpicc was found])])
    ])
  ])
  vccl_pmpi_summary="none"
  AS_IF([test $vccl_pmpi_ompi = 1], [vccl_pmpi_summary="openmpi"])
  AS_IF([test $vccl_pmpi_mpich = 1],
        [AS_IF([test $vccl_pmpi_ompi = 1], [vccl_pmpi_summary="openmpi mpich"], [vccl_pmpi_summary="mpich"])])
  AM_CONDITIONAL([HAVE_PMPI_OMPI], [test $vccl_pmpi_ompi = 1])
  AM_CONDITIONAL([HAVE_PMPI_MPICH], [test $vccl_pmpi_mpich = 1])
  AC_SUBST([PMPI_OMPI_CPPFLAGS])
  AC_SUBST([PMPI_OMPI_LIBS])
  AC_SUBST([PMPI_OMPI_MPIRUN])
  AC_SUBST([PMPI_MPICH_CPPFLAGS])
  AC_SUBST([PMPI_MPICH_LIBS])
  AC_SUBST([PMPI_MPICH_MPIEXEC])
])
