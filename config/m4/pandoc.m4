# SPDX-License-Identifier: BSD-3-Clause
# VCCL_CHECK_PANDOC: pandoc regenerates man pages from their Markdown sources; optional, the nroff output is
# shipped in man/.
AC_DEFUN([VCCL_CHECK_PANDOC], [
  AC_PATH_PROG([PANDOC], [pandoc], [])
  AM_CONDITIONAL([HAVE_PANDOC], [test -n "$PANDOC"])
  AS_IF([test -n "$PANDOC"], [vccl_pandoc_summary="yes"], [vccl_pandoc_summary="no"])
])
