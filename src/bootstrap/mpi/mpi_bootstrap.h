/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The MPI bootstrap: an external bootstrap (vcclBootstrap_t, vccl.h) over a private duplicate of an MPI
 * communicator. Built into libvccl_mpi, which uses only vccl's public API, so that libvccl itself never depends on
 * MPI and this file builds against any MPI.
 *
 * Every wait is nonblocking MPI (Isend, Improbe, Iallgather, ...) polled against the wait vccl hands each call
 * (VCCL_BOOTSTRAP_TIMEOUT), so a missing rank yields vcclTimeout instead of a hang. When MPI runs below
 * MPI_THREAD_MULTIPLE, calls into MPI are serialised by a process-wide mutex (callers still need at least
 * MPI_THREAD_SERIALIZED to use vccl from several threads).
 */
#ifndef VCCL_BOOTSTRAP_MPI_MPI_BOOTSTRAP_H_
#define VCCL_BOOTSTRAP_MPI_MPI_BOOTSTRAP_H_

#include <mpi.h>

#include "vccl.h"

namespace vccl_mpi {

/* Duplicates `comm` (collective over it) and fills *out with a bootstrap over the duplicate; vcclCommInitBootstrap
 * then owns it. On failure the text is in last_error(). */
vcclResult_t mpi_bootstrap_create(MPI_Comm comm, vcclBootstrap_t* out);
/* The calling thread's last failure of the MPI bootstrap. */
const char* last_error();

} // namespace vccl_mpi

#endif
