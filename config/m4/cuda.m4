# SPDX-License-Identifier: BSD-3-Clause
# VCCL_CHECK_CUDA: --with-cuda[=DIR] (default: use /usr/local/cuda when present), --without-cuda.
# Defines VCCL_HAVE_CUDA to 0 or 1; substitutes CUDA_CPPFLAGS, CUDA_LDFLAGS, CUDA_LIBS, NVCC.
AC_DEFUN([VCCL_CHECK_CUDA], [
  AC_ARG_WITH([cuda], [AS_HELP_STRING([--with-cuda@<:@=DIR@:>@], [CUDA toolkit (default: /usr/local/cuda if found)])],
              [], [with_cuda=check])
  vccl_have_cuda=0
  vccl_cuda_summary="no"
  CUDA_CPPFLAGS=""; CUDA_LDFLAGS=""; CUDA_LIBS=""; NVCC=""; CUPTI_FOUND=0; CUPTI_LIBS=""
  AS_IF([test "x$with_cuda" != xno], [
    AS_CASE(["$with_cuda"], [yes|check], [vccl_cuda_dir=/usr/local/cuda], [vccl_cuda_dir="$with_cuda"])
    vccl_save_CPPFLAGS="$CPPFLAGS"; vccl_save_LDFLAGS="$LDFLAGS"; vccl_save_LIBS="$LIBS"
    CPPFLAGS="$CPPFLAGS -I$vccl_cuda_dir/include"
    LDFLAGS="$LDFLAGS -L$vccl_cuda_dir/lib64"
    AC_CHECK_HEADER([cuda_runtime_api.h], [
      AC_CHECK_LIB([cudart_static], [cudaGetDeviceCount], [vccl_have_cuda=1], [], [-ldl -lrt -lpthread])])
    CPPFLAGS="$vccl_save_CPPFLAGS"; LDFLAGS="$vccl_save_LDFLAGS"; LIBS="$vccl_save_LIBS"
    AS_IF([test $vccl_have_cuda = 1], [
      CUDA_CPPFLAGS="-I$vccl_cuda_dir/include"
      CUDA_LDFLAGS="-L$vccl_cuda_dir/lib64"
      CUDA_LIBS="-lcudart_static -ldl -lrt -lpthread"
      AC_PATH_PROG([NVCC], [nvcc], [], [$vccl_cuda_dir/bin:$PATH])
      vccl_cuda_summary="yes ($vccl_cuda_dir)"
      # CUPTI (optional): tests/gpu counts kernel launches with it.
      AS_IF([test -f "$vccl_cuda_dir/include/cupti.h" && test -f "$vccl_cuda_dir/lib64/libcupti.so"], [
        CUPTI_FOUND=1
        CUPTI_LIBS="-L$vccl_cuda_dir/lib64 -lcupti -Wl,-rpath,$vccl_cuda_dir/lib64"
        vccl_cuda_summary="$vccl_cuda_summary, CUPTI"])
      AS_IF([test -z "$NVCC"], [
        AS_IF([test "x$with_cuda" = xcheck],
              [AC_MSG_WARN([nvcc not found: building without CUDA]); vccl_have_cuda=0; vccl_cuda_summary="no (nvcc missing)"
               CUDA_CPPFLAGS=""; CUDA_LDFLAGS=""; CUDA_LIBS=""],
              [AC_MSG_ERROR([CUDA requested but nvcc was not found in $vccl_cuda_dir/bin])])])
    ], [
      AS_IF([test "x$with_cuda" != xcheck], [AC_MSG_ERROR([CUDA requested but not found in $vccl_cuda_dir])])
    ])
  ])
  AC_DEFINE_UNQUOTED([VCCL_HAVE_CUDA], [$vccl_have_cuda], [Define to 1 when built with CUDA])
  AM_CONDITIONAL([HAVE_CUDA], [test $vccl_have_cuda = 1])
  AM_CONDITIONAL([HAVE_NVCC], [test $vccl_have_cuda = 1 && test -n "$NVCC"])
  AC_SUBST([CUDA_CPPFLAGS])
  AC_SUBST([CUDA_LDFLAGS])
  AC_SUBST([CUDA_LIBS])
  AC_SUBST([NVCC])
  AC_SUBST([CUPTI_FOUND])
  AC_SUBST([CUPTI_LIBS])
])
