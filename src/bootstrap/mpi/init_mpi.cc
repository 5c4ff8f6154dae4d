/* vcclCommInitMPI: argument checks, then the MPI bootstrap and the ordinary communicator initialisation. */
#include <mpi.h>

#include <memory>

#include "bootstrap/mpi/mpi_bootstrap.h"
#include "comm/comm.h"
#include "core/status.h"
#include "vccl_mpi.h"

extern "C" VCCL_EXPORT vcclResult_t vcclCommInitMPI(vcclComm_t* comm, MPI_Comm mpicomm, const vcclConfig_t* config) {
    if (comm == nullptr) return vccl::set_last_error(vcclInvalidArgument, "vcclCommInitMPI: comm is NULL");
    int initialized = 0, finalized = 0;
    MPI_Initialized(&initialized);
    MPI_Finalized(&finalized);
    if (!initialized || finalized) {
        return vccl::set_last_error(vcclInvalidUsage, "vcclCommInitMPI: MPI is %s; call it between MPI_Init and MPI_Finalize",
                                    finalized ? "already finalized" : "not initialized");
    }
    if (mpicomm == MPI_COMM_NULL) {
        return vccl::set_last_error(vcclInvalidArgument, "vcclCommInitMPI: mpicomm is MPI_COMM_NULL");
    }
    std::shared_ptr<vccl::Bootstrap> bootstrap;
    VCCL_RETURN_IF_ERROR(vccl::mpi_bootstrap_create(mpicomm, &bootstrap));
    return vccl::comm_init_with_bootstrap(comm, std::move(bootstrap), config);
}
