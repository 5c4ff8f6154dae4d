/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * vccl_mpi.h - creating vccl communicators over an MPI communicator (link with -lvccl_mpi -lvccl).
 *
 * The MPI bootstrap replaces vcclGetUniqueId + vcclCommInitRank: ranks find each other through MPI, so no
 * unique id needs distributing and no TCP port is opened. The vccl communicator has the same ranks, in the
 * same order, as the MPI communicator; it stays valid after mpicomm is freed (vccl keeps a duplicate), but
 * must be destroyed before MPI_Finalize.
 */
#ifndef VCCL_MPI_H_
#define VCCL_MPI_H_

#include <mpi.h>

#include "vccl.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * Collective over mpicomm: every process of mpicomm must call it. Creates *comm with rank and size equal to
 * the caller's rank and size in mpicomm. config may be NULL for defaults.
 * Returns vcclInvalidArgument for a NULL comm or MPI_COMM_NULL, vcclInvalidUsage when called before
 * MPI_Init or after MPI_Finalize, vcclTimeout when a bootstrap exchange exceeds VCCL_BOOTSTRAP_TIMEOUT.
 * Calling it from several threads at once needs MPI initialised with MPI_THREAD_MULTIPLE (or serialised
 * calls with MPI_THREAD_SERIALIZED).
 */
VCCL_EXPORT vcclResult_t vcclCommInitMPI(vcclComm_t* comm, MPI_Comm mpicomm, const vcclConfig_t* config);

#ifdef __cplusplus
}
#endif

#endif /* VCCL_MPI_H_ */
