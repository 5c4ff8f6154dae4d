#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Regenerates configure and Makefile.in from configure.ac and Makefile.am.
set -e
cd "$(dirname "$0")"
mkdir -p config/aux
autoreconf --install --force -I config/m4
