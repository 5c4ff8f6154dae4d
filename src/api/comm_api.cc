/* SPDX-License-Identifier: BSD-3-Clause */
/* Communicator entry points: argument checks and mapping to comm/, nothing else. */
#include <mutex>
#include <string>
#include <vector>
#include "api/check.h"
#include "bootstrap/external_bootstrap.h"
#include "bootstrap/tcp/tcp_bootstrap.h"
#include "comm/comm_ops.h"
#include "comm/group.h"
#include "core/status.h"

using namespace vccl;

extern "C" VCCL_EXPORT vcclResult_t vcclGetUniqueId(vcclUniqueId* uniqueId) {
    if (uniqueId == nullptr) return set_last_error(vcclInvalidArgument, "vcclGetUniqueId: uniqueId is NULL");
    return tcp_unique_id_create(uniqueId);
}

extern "C" VCCL_EXPORT vcclResult_t vcclCommInitRankConfig(vcclComm_t* comm, int nranks, vcclUniqueId commId,
                                                           int rank, vcclConfig_t* config) {
    const char* fn = "vcclCommInitRank";
    if (comm == nullptr) return set_last_error(vcclInvalidArgument, "%s: comm is NULL", fn);
    if (nranks < 1) return set_last_error(vcclInvalidArgument, "%s: nranks %d must be at least 1", fn, nranks);
    VCCL_RETURN_IF_ERROR(check_rank(rank, nranks, "rank", fn));
    // Reject a bad config before contacting the bootstrap root, so the unique id stays usable.
    VCCL_RETURN_IF_ERROR(comm_check_config(config));
    // Nonblocking (config->blocking = 0), the wait at the bootstrap root for the other ranks runs on the
    // creation's thread too.
    return comm_create(comm, [commId, rank, nranks](const CancelScope* cancel, std::shared_ptr<Bootstrap>* made) {
        return tcp_bootstrap_create(commId, rank, nranks, made, cancel);
    }, config);
}

extern "C" VCCL_EXPORT vcclResult_t vcclCommInitRank(vcclComm_t* comm, int nranks, vcclUniqueId commId, int rank) {
    return vcclCommInitRankConfig(comm, nranks, commId, rank, nullptr);
}

extern "C" VCCL_EXPORT vcclResult_t vcclCommInitBootstrap(vcclComm_t* comm, const vcclBootstrap_t* bootstrap,
                                                          const vcclConfig_t* config) {
    const char* fn = "vcclCommInitBootstrap";
    if (bootstrap == nullptr) return set_last_error(vcclInvalidArgument, "%s: bootstrap is NULL", fn);
    std::shared_ptr<Bootstrap> wrapped;
    VCCL_RETURN_IF_ERROR(external_bootstrap_create(bootstrap, &wrapped)); // owns the bootstrap's ctx from here
    if (comm == nullptr) return set_last_error(vcclInvalidArgument, "%s: comm is NULL", fn);
    VCCL_RETURN_IF_ERROR(comm_check_config(config));
    return comm_init_with_bootstrap(comm, std::move(wrapped), config);
}

extern "C" VCCL_EXPORT vcclResult_t vcclCommSplit(vcclComm_t comm, int color, int key, vcclComm_t* newcomm,
                                                  vcclConfig_t* config) {
    VCCL_RETURN_IF_ERROR(check_comm(comm, "vcclCommSplit"));
    if (newcomm == nullptr) return set_last_error(vcclInvalidArgument, "vcclCommSplit: newcomm is NULL");
    if (color < 0 && color != VCCL_SPLIT_NOCOLOR) {
        return set_last_error(vcclInvalidArgument, "vcclCommSplit: color %d must be >= 0 or VCCL_SPLIT_NOCOLOR",
                              color);
    }
    return comm_split(comm, color, key, newcomm, config);
}

extern "C" VCCL_EXPORT vcclResult_t vcclCommShrink(vcclComm_t comm, int* excludeRanksList, int excludeRanksCount,
                                                   vcclComm_t* newcomm, vcclConfig_t* config, int shrinkFlags) {
    VCCL_RETURN_IF_ERROR(check_comm(comm, "vcclCommShrink"));
    if (newcomm == nullptr) return set_last_error(vcclInvalidArgument, "vcclCommShrink: newcomm is NULL");
    *newcomm = nullptr;
    if (excludeRanksCount < 0 || (excludeRanksCount > 0 && excludeRanksList == nullptr)) {
        return set_last_error(vcclInvalidArgument, "vcclCommShrink: %d excluded ranks in list %p", excludeRanksCount,
                              static_cast<void*>(excludeRanksList));
    }
    if (shrinkFlags != VCCL_SHRINK_DEFAULT && shrinkFlags != VCCL_SHRINK_ABORT) {
        return set_last_error(vcclInvalidArgument, "vcclCommShrink: flags 0x%x (VCCL_SHRINK_DEFAULT or VCCL_SHRINK_ABORT)",
                              shrinkFlags);
    }
    std::vector<bool> excluded(size_t(comm->nranks), false);
    for (int i = 0; i < excludeRanksCount; ++i) {
        int r = excludeRanksList[i];
        if (r < 0 || r >= comm->nranks) {
            return set_last_error(vcclInvalidArgument, "vcclCommShrink: excluded rank %d is not in 0..%d", r,
                                  comm->nranks - 1);
        }
        if (excluded[size_t(r)]) return set_last_error(vcclInvalidArgument, "vcclCommShrink: rank %d excluded twice", r);
        excluded[size_t(r)] = true;
    }
    if (excluded[size_t(comm->rank)]) {
        return set_last_error(vcclInvalidUsage, "vcclCommShrink: the calling rank %d is in the exclude list", comm->rank);
    }
    std::vector<int> members;
    for (int r = 0; r < comm->nranks; ++r) {
        if (!excluded[size_t(r)]) members.push_back(r);
    }
    return comm_shrink(comm, members, shrinkFlags == VCCL_SHRINK_ABORT, newcomm, config);
}

extern "C" VCCL_EXPORT vcclResult_t vcclCommGetUniqueId(vcclComm_t comm, vcclUniqueId* uniqueId) {
    VCCL_RETURN_IF_ERROR(check_comm(comm, "vcclCommGetUniqueId"));
    if (uniqueId == nullptr) return set_last_error(vcclInvalidArgument, "vcclCommGetUniqueId: uniqueId is NULL");
    return comm_grow_unique_id(comm, uniqueId);
}

extern "C" VCCL_EXPORT vcclResult_t vcclCommGrow(vcclComm_t comm, int nRanks, const vcclUniqueId* uniqueId, int rank,
                                                 vcclComm_t* newcomm, vcclConfig_t* config) {
    const char* fn = "vcclCommGrow";
    if (newcomm == nullptr) return set_last_error(vcclInvalidArgument, "%s: newcomm is NULL", fn);
    if (comm == nullptr) { // a new rank
        if (uniqueId == nullptr) {
            return set_last_error(vcclInvalidArgument, "%s: a new rank (comm NULL) needs the grow id", fn);
        }
        if (nRanks < 2) {
            return set_last_error(vcclInvalidArgument, "%s: nRanks %d: a grown communicator has at least 2", fn,
                                  nRanks);
        }
        VCCL_RETURN_IF_ERROR(check_rank(rank, nRanks, "rank", fn));
        VCCL_RETURN_IF_ERROR(comm_check_config(config));
        return comm_grow_join(nRanks, *uniqueId, rank, newcomm, config);
    }
    VCCL_RETURN_IF_ERROR(check_comm(comm, fn));
    if (rank != -1) {
        return set_last_error(vcclInvalidArgument, "%s: rank %d: a rank of comm keeps its rank and passes -1", fn,
                              rank);
    }
    if (nRanks <= comm->nranks) {
        return set_last_error(vcclInvalidArgument, "%s: nRanks %d is not larger than the communicator (%d ranks)", fn,
                              nRanks, comm->nranks);
    }
    return comm_grow(comm, nRanks, uniqueId, newcomm, config);
}

extern "C" VCCL_EXPORT vcclResult_t vcclCommRevoke(vcclComm_t comm, int revokeFlags) {
    VCCL_RETURN_IF_ERROR(check_comm(comm, "vcclCommRevoke"));
    if (revokeFlags != VCCL_REVOKE_DEFAULT) {
        return set_last_error(vcclInvalidArgument, "vcclCommRevoke: flags 0x%x (VCCL_REVOKE_DEFAULT is the only one)",
                              revokeFlags);
    }
    return comm_revoke(comm);
}

extern "C" VCCL_EXPORT vcclResult_t vcclCommDestroy(vcclComm_t comm) {
    VCCL_RETURN_IF_ERROR(check_comm_handle(comm, "vcclCommDestroy"));
    return comm_destroy(comm, false);
}

extern "C" VCCL_EXPORT vcclResult_t vcclCommAbort(vcclComm_t comm) {
    VCCL_RETURN_IF_ERROR(check_comm_handle(comm, "vcclCommAbort"));
    return comm_destroy(comm, true);
}

extern "C" VCCL_EXPORT vcclResult_t vcclCommGetAsyncError(vcclComm_t comm, vcclResult_t* asyncError) {
    VCCL_RETURN_IF_ERROR(check_comm_handle(comm, "vcclCommGetAsyncError"));
    if (asyncError == nullptr) return set_last_error(vcclInvalidArgument, "vcclCommGetAsyncError: asyncError is NULL");
    const int creation = comm->creation.load();
    if (creation == kCommCreating) {
        *asyncError = vcclInProgress;
        return vcclSuccess;
    }
    if (creation == kCommCreationFailed) {
        *asyncError = vcclResult_t(comm->async_error.load());
        return vcclSuccess;
    }
    if (comm->async_error.load() == vcclSuccess && comm->dev.ipc) {
        // A peer that gave up a direct device transfer with this rank after this rank's call had returned.
        int who = comm->dev.ipc->failed_peer();
        if (who >= 0) comm_note_failed_peer(comm, who);
    }
    *asyncError = vcclResult_t(comm->async_error.load());
    return vcclSuccess;
}

extern "C" VCCL_EXPORT vcclResult_t vcclCommCount(const vcclComm_t comm, int* count) {
    VCCL_RETURN_IF_ERROR(check_comm(comm, "vcclCommCount"));
    if (count == nullptr) return set_last_error(vcclInvalidArgument, "vcclCommCount: count is NULL");
    *count = comm->nranks;
    return vcclSuccess;
}

extern "C" VCCL_EXPORT vcclResult_t vcclCommUserRank(const vcclComm_t comm, int* rank) {
    VCCL_RETURN_IF_ERROR(check_comm(comm, "vcclCommUserRank"));
    if (rank == nullptr) return set_last_error(vcclInvalidArgument, "vcclCommUserRank: rank is NULL");
    *rank = comm->rank;
    return vcclSuccess;
}

extern "C" VCCL_EXPORT vcclResult_t vcclGroupStart(void) { return group_start(); }

extern "C" VCCL_EXPORT vcclResult_t vcclGroupEnd(void) { return group_end(); }
