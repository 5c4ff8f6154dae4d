/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Default collectives of Bootstrap, written once over send/recv so that every implementation (TCP, subsets)
 * gets them; MPI overrides them with MPI's own. They are for small control data: latency matters little,
 * so the algorithms are the simplest ones whose step count stays logarithmic or linear in nranks.
 */
#include "bootstrap/bootstrap.h"

#include <cstring>

#include "core/log.h"
#include "core/status.h"

namespace vccl {

namespace {

/* Bits 56..61 of a collective tag name the collective, so a mismatched call order shows up as a timeout
 * naming the right tag instead of a silent mix-up. */
constexpr uint64_t kKindShift = 56;
constexpr uint64_t kKindAllgather = 1;
constexpr uint64_t kKindBroadcast = 2;
constexpr uint64_t kKindBarrier = 3;

} // namespace

uint64_t Bootstrap::next_coll_tag(uint64_t kind) {
    uint64_t seq = coll_seq_.fetch_add(1, std::memory_order_relaxed);
    return kBootstrapCollTagBit | (kind << kKindShift) | (seq & ((1ull << kKindShift) - 1));
}

/* Ring: in step s, rank r forwards the slot it received in step s-1 (initially its own) to r+1. n-1 steps,
 * every rank sends and receives exactly one slot per step. The send is issued before the receive; the TCP
 * implementation keeps draining its incoming sockets while a send is blocked, so large slots do not deadlock. */
vcclResult_t Bootstrap::allgather(void* data, size_t bytes) {
    const int n = nranks(), me = rank();
    if (data == nullptr && bytes > 0) {
        return set_last_error(vcclInvalidArgument, "bootstrap allgather: NULL buffer for %zu bytes per rank", bytes);
    }
    const uint64_t tag = next_coll_tag(kKindAllgather);
    char* base = static_cast<char*>(data);
    const int right = (me + 1) % n, left = (me + n - 1) % n;
    for (int step = 0; step < n - 1; ++step) {
        const int send_slot = (me - step + n) % n;
        const int recv_slot = (me - step - 1 + 2 * n) % n;
        VCCL_RETURN_IF_ERROR(send(right, tag, base + size_t(send_slot) * bytes, bytes));
        VCCL_RETURN_IF_ERROR(recv(left, tag, base + size_t(recv_slot) * bytes, bytes));
    }
    return vcclSuccess;
}

/* Binomial tree over ranks renumbered so that root is 0: a rank receives once from the rank that differs in
 * its lowest set bit, then forwards to the ranks below that bit. log2(n) rounds. */
vcclResult_t Bootstrap::broadcast(void* data, size_t bytes, int root) {
    const int n = nranks(), me = rank();
    if (root < 0 || root >= n) {
        return set_last_error(vcclInvalidArgument, "bootstrap broadcast: root %d out of range [0, %d)", root, n);
    }
    if (data == nullptr && bytes > 0) {
        return set_last_error(vcclInvalidArgument, "bootstrap broadcast: NULL buffer for %zu bytes", bytes);
    }
    const uint64_t tag = next_coll_tag(kKindBroadcast);
    const int vrank = (me - root + n) % n;
    int mask = 1;
    while (mask < n) {
        if (vrank & mask) {
            const int parent = (vrank - mask + root) % n;
            VCCL_RETURN_IF_ERROR(recv(parent, tag, data, bytes));
            break;
        }
        mask <<= 1;
    }
    for (mask >>= 1; mask > 0; mask >>= 1) {
        if (vrank + mask < n) {
            const int child = (vrank + mask + root) % n;
            VCCL_RETURN_IF_ERROR(send(child, tag, data, bytes));
        }
    }
    return vcclSuccess;
}

/* Dissemination barrier: in round k a rank signals rank+2^k and waits for rank-2^k. After ceil(log2 n)
 * rounds every rank has (transitively) heard from every other, so nobody leaves before all arrived. */
vcclResult_t Bootstrap::barrier() {
    const int n = nranks(), me = rank();
    const uint64_t tag = next_coll_tag(kKindBarrier);
    for (int dist = 1; dist < n; dist <<= 1) {
        const char token = 1;
        char got = 0;
        VCCL_RETURN_IF_ERROR(send((me + dist) % n, tag, &token, 1));
        VCCL_RETURN_IF_ERROR(recv((me - dist + n) % n, tag, &got, 1));
    }
    return vcclSuccess;
}

vcclResult_t Bootstrap::split(const std::vector<int>& members, int new_rank, uint64_t split_id,
                              std::shared_ptr<Bootstrap>* out) {
    if (out == nullptr) return set_last_error(vcclInvalidArgument, "bootstrap split: NULL output pointer");
    std::shared_ptr<Bootstrap> self = weak_from_this().lock();
    if (!self) {
        return set_last_error(vcclInvalidUsage,
                              "bootstrap split: the parent bootstrap is not owned by a std::shared_ptr, so a child "
                              "could not keep it alive");
    }
    std::shared_ptr<Bootstrap> child = make_subset_bootstrap(std::move(self), members, new_rank, split_id);
    if (!child) return vcclInvalidArgument; // make_subset_bootstrap recorded why
    *out = std::move(child);
    return vcclSuccess;
}

} // namespace vccl
