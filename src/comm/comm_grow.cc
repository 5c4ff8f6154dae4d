/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * vcclCommGrow and vcclCommGetUniqueId (NCCL 2.29's ncclCommGrow): a larger communicator of a live one's ranks,
 * which keep their ranks, and new ranks that join with a grow id. The id names a TCP bootstrap whose root runs
 * in the process that made it, so the new communicator has a bootstrap of its own; the parent is left as it was.
 */
#include <cstring>
#include <memory>
#include <mutex>
#include <vector>

#include "bootstrap/tcp/tcp_bootstrap.h"
#include "comm/comm.h"
#include "comm/comm_ops.h"
#include "core/log.h"
#include "core/status.h"

namespace vccl {

namespace {

vcclResult_t check_usable(vcclComm* comm, const char* fn) {
    if (comm->destroyed.load() || comm->aborted.load()) {
        return set_last_error(vcclInvalidUsage, "%s: communicator %s was %s", fn, comm->name.c_str(),
                              comm->revoked.load() ? "revoked" : "destroyed or aborted");
    }
    return vcclSuccess;
}

/* What each existing rank brings to a grow: whether it holds the id, and the size it asks for. */
struct GrowVote {
    int32_t has_id;
    int32_t nranks;
    vcclUniqueId id;
};

} // namespace

vcclResult_t comm_grow_unique_id(vcclComm* comm, vcclUniqueId* id) {
    {
        std::lock_guard<std::mutex> lock(comm->op_mutex);
        VCCL_RETURN_IF_ERROR(check_usable(comm, "vcclCommGetUniqueId"));
    }
    return tcp_unique_id_create(id);
}

vcclResult_t comm_grow(vcclComm* comm, int nranks, const vcclUniqueId* given, vcclComm_t* out,
                       const vcclConfig_t* config_given) {
    VCCL_RETURN_IF_ERROR(comm_check_config(config_given));
    vcclConfig_t inherited;
    const vcclConfig_t* config = config_given;
    std::shared_ptr<Bootstrap> bootstrap; // a copy: another thread's destroy empties the communicator
    {
        std::lock_guard<std::mutex> lock(comm->op_mutex);
        VCCL_RETURN_IF_ERROR(check_usable(comm, "vcclCommGrow"));
        bootstrap = comm->bootstrap;
        config = comm_child_config(comm, config_given, &inherited);
    }
    // Only the coordinator holds the id (NCCL's contract); the others learn it here. Every rank sees the same
    // votes, so a bad grow fails alike everywhere instead of leaving some ranks waiting for the new ones.
    std::vector<GrowVote> votes(size_t(comm->nranks));
    GrowVote& mine = votes[size_t(comm->rank)];
    memset(&mine, 0, sizeof(mine));
    mine.has_id = given != nullptr ? 1 : 0;
    mine.nranks = nranks;
    if (given != nullptr) mine.id = *given;
    VCCL_RETURN_IF_ERROR(bootstrap->allgather(votes.data(), sizeof(GrowVote)));
    int holders = 0, holder = -1;
    for (int r = 0; r < comm->nranks; ++r) {
        if (votes[size_t(r)].nranks != nranks) {
            return set_last_error(vcclInvalidArgument, "vcclCommGrow: rank %d asks for %d ranks, rank %d for %d",
                                  r, votes[size_t(r)].nranks, comm->rank, nranks);
        }
        if (votes[size_t(r)].has_id != 0) {
            ++holders;
            holder = r;
        }
    }
    if (holders != 1) {
        return set_last_error(vcclInvalidArgument,
                              "vcclCommGrow: exactly one rank of the communicator must pass the grow id (from "
                              "vcclCommGetUniqueId), the others NULL; %d passed one",
                              holders);
    }
    VCCL_INFO(kLogInit, "%s: rank %d grows to %d ranks", comm->name.c_str(), comm->rank, nranks);
    const vcclUniqueId id = votes[size_t(holder)].id;
    const int rank = comm->rank;
    return comm_create(out, [id, rank, nranks](const CancelScope* cancel, std::shared_ptr<Bootstrap>* grown) {
        return tcp_bootstrap_create(id, rank, nranks, grown, cancel);
    }, config);
}

vcclResult_t comm_grow_join(int nranks, const vcclUniqueId& id, int rank, vcclComm_t* out, const vcclConfig_t* config) {
    VCCL_RETURN_IF_ERROR(comm_check_config(config));
    return comm_create(out, [id, rank, nranks](const CancelScope* cancel, std::shared_ptr<Bootstrap>* grown) {
        return tcp_bootstrap_create(id, rank, nranks, grown, cancel);
    }, config);
}

} // namespace vccl
