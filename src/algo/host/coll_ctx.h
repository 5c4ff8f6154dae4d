/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * CollCtx: what an algorithm sees while it runs one collective on one rank. It offers tagged
 * point-to-point messages scoped to this collective (so concurrent collectives never mix), waits that
 * honour abort and the operation timeout, scratch memory, and the local reduction and copy for the
 * collective's datatype, op and memory type.
 *
 * Algorithms are written as straight-line code: post sends and receives, wait, reduce. Messages between
 * the same pair inside one collective match in posting order.
 */
#ifndef VCCL_ALGO_HOST_COLL_CTX_H_
#define VCCL_ALGO_HOST_COLL_CTX_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/clock.h"
#include "core/coll_settings.h"
#include "core/scratch_arena.h"
#include "transport/transport.h"
#include "vccl.h"

namespace vccl {

class HostGroups; // algo/host_groups.h

class CollCtx {
public:
    using ReqId = int;

    /* tag_base: 44-bit tag space of this collective (the communicator's sequence number, shifted).
     * Resets `scratch`: the arena belongs to this collective until the context is destroyed. */
    CollCtx(Transport* transport, int rank, int nranks, uint64_t tag_base, vcclDataType_t dtype, vcclRedOp_t op,
            const CollSettings& settings, const std::atomic<bool>* abort_flag, ScratchArena* scratch);
    ~CollCtx(); // releases (cancels) anything still pending
    CollCtx(const CollCtx&) = delete;
    CollCtx& operator=(const CollCtx&) = delete;

    /* Inside a CollSubgroup: the index among its members and their count; otherwise the communicator's. */
    int rank() const { return rank_; }
    int nranks() const { return nranks_; }
    /* Which ranks share a host (NULL: unknown, treated as one host); two-level algorithms read it. NULL inside
     * a CollSubgroup, whose ranks are not the communicator's. */
    void set_hosts(const HostGroups* hosts) { hosts_ = hosts; }
    const HostGroups* hosts() const { return hosts_; }
    const CollSettings& settings() const { return settings_; }
    vcclDataType_t dtype() const { return dtype_; }
    vcclRedOp_t op() const { return op_; }
    size_t type_size() const { return type_size_; }

    vcclResult_t isend(int peer, const void* buf, size_t bytes, ReqId* id = nullptr);
    vcclResult_t irecv(int peer, void* buf, size_t bytes, ReqId* id = nullptr);
    /* wait() on an id already completed returns at once. wait_all() also returns the sticky error, so an
     * algorithm that ends with it reports a failure of any earlier step (including a reduce or copy). */
    vcclResult_t wait(ReqId id);
    vcclResult_t wait_all();
    /* Send to one peer and receive from another, then wait for both. */
    vcclResult_t sendrecv(int send_peer, const void* sendbuf, size_t send_bytes, int recv_peer, void* recvbuf,
                          size_t recv_bytes);

    /* dst = a op b over `count` elements (vcclAvg reduces as a sum). */
    void reduce(void* dst, const void* a, const void* b, size_t count);
    /* buf /= nranks when op is vcclAvg; no-op otherwise. */
    void finish_avg(void* buf, size_t count);
    void copy(void* dst, const void* src, size_t bytes);
    void* scratch(size_t bytes) { return scratch_->get(bytes); }

    /* Elements per pipelined chunk: settings().chunk_bytes rounded down to whole elements, at least one. */
    size_t chunk_elems() const;
    /* The first error of this collective (sticky), vcclSuccess while none. */
    vcclResult_t status() const { return error_; }

private:
    friend class CollSubgroup;
    vcclResult_t post_check(vcclResult_t status, TransportRequest* req, ReqId* id);
    vcclResult_t fail(vcclResult_t status);

    Transport* transport_;
    int rank_;
    int nranks_;
    int base_rank_;                     // the communicator's rank and size, also inside a subgroup
    int base_nranks_;
    const int* members_ = nullptr;      // inside a CollSubgroup: peer index -> communicator rank
    const HostGroups* hosts_ = nullptr;
    uint64_t tag_;
    vcclDataType_t dtype_;
    vcclRedOp_t op_;
    size_t type_size_;
    CollSettings settings_;
    const std::atomic<bool>* abort_flag_;
    ScratchArena* scratch_;
    /* Armed by the first wait that has to spin (kDeadlineSpins polls), then checked every kDeadlineSpins
     * polls: reading the clock on every poll was 12% of an 8-byte allreduce's CPU time (clock_gettime in a
     * VM), and a collective that completes at once never needs it. The timeout thus counts from the first
     * wait that had to spin, not from the start of the collective (earlier waits each took < 64 polls). */
    static constexpr unsigned kDeadlineSpins = 64;
    Deadline deadline_ = Deadline::never();
    bool deadline_armed_ = false;
    bool deadline_passed(); // arms the deadline on its first call
    std::vector<TransportRequest*> reqs_; // index = ReqId; nullptr once completed and released
    struct ReqInfo {
        int peer;
        size_t bytes;
        bool is_send;
    };
    std::vector<ReqInfo> info_;           // index = ReqId, for error messages
    size_t first_pending_ = 0;            // every ReqId below this has completed (wait_all starts here)
    vcclResult_t error_ = vcclSuccess;    // sticky: the first failure ends the collective
};

/* One phase of a composed (two-level) algorithm among some of the collective's ranks: while it lives, the
 * context's rank(), nranks() and peers are those of `members` (communicator ranks, this rank among them) and
 * reductions use `op`, so any algorithm runs unchanged on the subset. Messages keep the collective's tag:
 * phases that share a pair of ranks follow one another on every rank, so they match in posting order. */
class CollSubgroup {
public:
    CollSubgroup(CollCtx& ctx, const std::vector<int>& members, vcclRedOp_t op);
    ~CollSubgroup();
    CollSubgroup(const CollSubgroup&) = delete;
    CollSubgroup& operator=(const CollSubgroup&) = delete;
private:
    CollCtx& ctx_;
    int rank_, nranks_;
    const int* members_;
    const HostGroups* hosts_;
    vcclRedOp_t op_;
};

/* Elements [begin, end) of block `index` when `count` elements are split into `blocks` nearly equal blocks
 * (the first count % blocks blocks get one more). */
inline void block_range(size_t count, int blocks, int index, size_t* begin, size_t* end) {
    size_t base = count / size_t(blocks), extra = count % size_t(blocks);
    size_t i = size_t(index);
    *begin = i * base + (i < extra ? i : extra);
    *end = *begin + base + (i < extra ? 1 : 0);
}

} // namespace vccl

#endif
