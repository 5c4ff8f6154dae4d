/* Communicator entry points: argument checks and mapping to comm/, nothing else. */
#include <mutex>
#include <string>
#include <vector>
#include "api/check.h"
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
    std::shared_ptr<Bootstrap> bootstrap;
    VCCL_RETURN_IF_ERROR(tcp_bootstrap_create(commId, rank, nranks, &bootstrap));
    return comm_init_with_bootstrap(comm, std::move(bootstrap), config);
}

extern "C" VCCL_EXPORT vcclResult_t vcclCommInitRank(vcclComm_t* comm, int nranks, vcclUniqueId commId, int rank) {
    return vcclCommInitRankConfig(comm, nranks, commId, rank, nullptr);
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

extern "C" VCCL_EXPORT vcclResult_t vcclCommDestroy(vcclComm_t comm) {
    VCCL_RETURN_IF_ERROR(check_comm(comm, "vcclCommDestroy"));
    return comm_destroy(comm, false);
}

extern "C" VCCL_EXPORT vcclResult_t vcclCommAbort(vcclComm_t comm) {
    VCCL_RETURN_IF_ERROR(check_comm(comm, "vcclCommAbort"));
    return comm_destroy(comm, true);
}

extern "C" VCCL_EXPORT vcclResult_t vcclCommGetAsyncError(vcclComm_t comm, vcclResult_t* asyncError) {
    VCCL_RETURN_IF_ERROR(check_comm(comm, "vcclCommGetAsyncError"));
    if (asyncError == nullptr) return set_last_error(vcclInvalidArgument, "vcclCommGetAsyncError: asyncError is NULL");
    if (comm->async_error.load() == vcclSuccess && comm->ipc) {
        // A peer that gave up a direct device transfer with this rank after this rank's call had returned.
        int who = comm->ipc->failed_peer();
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

namespace vccl {
namespace testing {

/* Test hook (tests/gpu): this rank's next direct device send (send != 0) or receive fails after the
 * descriptors were exchanged, as a failed IPC mapping would, leaving the peer's stream waiting until the
 * peer aborts or destroys its communicator. */
vcclResult_t fail_next_direct(vcclComm_t comm, int send) {
    VCCL_RETURN_IF_ERROR(check_comm(comm, "fail_next_direct"));
    std::lock_guard<std::mutex> lock(comm->op_mutex);
    if (!comm->ipc) return set_last_error(vcclInvalidUsage, "fail_next_direct: no direct device path");
    comm->ipc->test_fail_next(send != 0);
    return vcclSuccess;
}

/* Test hook (tests/gpu): this rank's next low-latency allreduce fails on the host before its kernel is
 * launched, as a failed scratch allocation or launch would. */
vcclResult_t fail_next_ll(vcclComm_t comm) {
    VCCL_RETURN_IF_ERROR(check_comm(comm, "fail_next_ll"));
    std::lock_guard<std::mutex> lock(comm->op_mutex);
    comm->test_fail_next_ll = true;
    return vcclSuccess;
}

/* Test hook (tests/gpu): this rank's next chunked collective moves only its first `chunks` chunks (each block its
 * share of them) and then its kernel ends, as if a peer had stopped in the middle of a call: the other ranks wait
 * for the rest until an abort. */
vcclResult_t stop_next_chunked(vcclComm_t comm, unsigned chunks) {
    VCCL_RETURN_IF_ERROR(check_comm(comm, "stop_next_chunked"));
    std::lock_guard<std::mutex> lock(comm->op_mutex);
    comm->test_chunked_stop = chunks;
    return vcclSuccess;
}

/* Test hook (tests/gpu): this rank's next send/recv batch with direct-path peers fails once the descriptors
 * have been exchanged both ways, before anything is enqueued, as a timeout of the exchange would. */
vcclResult_t fail_next_exchange(vcclComm_t comm) {
    VCCL_RETURN_IF_ERROR(check_comm(comm, "fail_next_exchange"));
    std::lock_guard<std::mutex> lock(comm->op_mutex);
    comm->test_fail_next_exchange = true;
    return vcclSuccess;
}

vcclResult_t pause_telemetry(vcclComm_t comm, int paused) {
    VCCL_RETURN_IF_ERROR(check_comm(comm, "pause_telemetry"));
    std::lock_guard<std::mutex> lock(comm->op_mutex);
    if (!comm->telemetry) return set_last_error(vcclInvalidUsage, "pause_telemetry: telemetry is off (VCCL_TELEMETRY=0)");
    if (comm->staged_pending.load() != 0 && comm->staged_queue) comm->staged_queue->wait_idle();
    comm->transport->pause_telemetry(paused != 0);
    if (comm->device_flows) comm->device_flows->set_paused(paused != 0);
    return vcclSuccess;
}

vcclResult_t staging_skip_sequence(vcclComm_t comm, unsigned n) {
    VCCL_RETURN_IF_ERROR(check_comm(comm, "staging_skip_sequence"));
    std::lock_guard<std::mutex> lock(comm->op_mutex);
    if (!comm->staged_queue) return set_last_error(vcclInvalidUsage, "staging_skip_sequence: no staged queue yet");
    comm->staged_queue->test_skip_sequence(n);
    return vcclSuccess;
}

long long direct_sends(vcclComm_t comm) {
    if (check_comm(comm, "direct_sends") != vcclSuccess) return -1;
    std::lock_guard<std::mutex> lock(comm->op_mutex);
    return comm->ipc ? static_cast<long long>(comm->ipc->direct_sends()) : 0;
}

long long ll_bytes(vcclComm_t comm) {
    if (check_comm(comm, "ll_bytes") != vcclSuccess) return -1;
    std::lock_guard<std::mutex> lock(comm->op_mutex);
    return comm->ipc ? static_cast<long long>(comm->ipc->ll_bytes()) : 0;
}

long long chunked_calls(vcclComm_t comm) {
    if (check_comm(comm, "chunked_calls") != vcclSuccess) return -1;
    std::lock_guard<std::mutex> lock(comm->op_mutex);
    return static_cast<long long>(comm->chunked_calls);
}

long long ll_calls(vcclComm_t comm) {
    if (check_comm(comm, "ll_calls") != vcclSuccess) return -1;
    std::lock_guard<std::mutex> lock(comm->op_mutex);
    return static_cast<long long>(comm->ll_calls);
}

long long ipc_block_reopens(vcclComm_t comm) {
    if (check_comm(comm, "ipc_block_reopens") != vcclSuccess) return -1;
    std::lock_guard<std::mutex> lock(comm->op_mutex);
    return comm->ipc ? static_cast<long long>(comm->ipc->block_reopens()) : 0;
}

long long ipc_evictions(vcclComm_t comm) {
    if (check_comm(comm, "ipc_evictions") != vcclSuccess) return -1;
    std::lock_guard<std::mutex> lock(comm->op_mutex);
    return comm->ipc ? static_cast<long long>(comm->ipc->evictions()) : 0;
}

} // namespace testing
} // namespace vccl
