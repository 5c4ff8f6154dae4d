/* SPDX-License-Identifier: BSD-3-Clause */
/* vcclCommInitMPI: argument checks, then the MPI bootstrap handed to vcclCommInitBootstrap. Public API only. */
#include <mpi.h>

#include <algorithm>
#include <cstring>

#include "bootstrap/mpi/mpi_bootstrap.h"
#include "vccl_mpi.h"

extern "C" VCCL_EXPORT vcclResult_t vcclCommInitMPI(vcclComm_t* comm, MPI_Comm mpicomm, const vcclConfig_t* config) {
    if (comm == nullptr) return vcclSetLastError(vcclInvalidArgument, "vcclCommInitMPI: comm is NULL");
    int initialized = 0, finalized = 0;
    MPI_Initialized(&initialized);
    MPI_Finalized(&finalized);
    if (!initialized || finalized) {
        return vcclSetLastError(vcclInvalidUsage, finalized ? "vcclCommInitMPI: MPI is already finalized; call it "
                                                              "between MPI_Init and MPI_Finalize"
                                                            : "vcclCommInitMPI: MPI is not initialized; call it "
                                                              "between MPI_Init and MPI_Finalize");
    }
    if (mpicomm == MPI_COMM_NULL) return vcclSetLastError(vcclInvalidArgument, "vcclCommInitMPI: mpicomm is MPI_COMM_NULL");
    vcclBootstrap_t bootstrap;
    vcclResult_t r = vccl_mpi::mpi_bootstrap_create(mpicomm, &bootstrap);
    if (r != vcclSuccess) return vcclSetLastError(r, vccl_mpi::last_error());
    // A nonblocking creation calls MPI from a thread of vccl's own, which MPI allows only at MPI_THREAD_MULTIPLE.
    // Below it the creation blocks and returns vcclSuccess (a nonblocking caller accepts that too).
    vcclConfig_t blocking_config = VCCL_CONFIG_INITIALIZER;
    int provided = MPI_THREAD_SINGLE;
    MPI_Query_thread(&provided);
    if (config != nullptr && config->blocking == 0 && provided != MPI_THREAD_MULTIPLE &&
        config->magic == VCCL_CONFIG_MAGIC && config->size <= 4096) {
        memcpy(&blocking_config, config, std::min(config->size, sizeof(blocking_config)));
        blocking_config.blocking = 1;
        config = &blocking_config;
    }
    return vcclCommInitBootstrap(comm, &bootstrap, config);
}
