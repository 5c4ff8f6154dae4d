/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Ring reduce-scatter: n-1 steps around r -> r+1. At step t rank r sends the running partial of block
 * r-t-1 (its own data at step 0) and receives from its left the partial of block r-t-2, to which it adds
 * its own contribution; after the last step (t = n-2) the block received is r itself, now complete, and it
 * is reduced straight into recvbuf (average applied there once).
 *
 * Blocks are cut into chunks of chunk_elems(); a chunk is passed on as soon as it is reduced. Receives land
 * in kDepth scratch slots. Partials are kept in two block-sized accumulators used by alternate steps:
 * sendbuf must not be modified, and a partial being sent at step t+1 must stay intact while step t+1's
 * partial is formed. Before step t+2 reuses an accumulator chunk, the send of step t's chunk is waited for;
 * by then the right neighbour has long posted the matching receive, so this wait cannot close a cycle.
 */
#include <algorithm>
#include <vector>

#include "algo/algo.h"
#include "core/status.h"

namespace vccl {
namespace {

constexpr size_t kDepth = 4; // receives in flight ahead of the one being reduced

vcclResult_t reducescatter_ring(CollCtx& ctx, const CollArgs& args) {
    const int n = ctx.nranks(), r = ctx.rank();
    const size_t ts = ctx.type_size(), count = args.count, chunk = ctx.chunk_elems();
    const size_t block_bytes = count * ts;
    const char* in = static_cast<const char*>(args.sendbuf);
    char* out = static_cast<char*>(args.recvbuf);
    if (count == 0) return vcclSuccess;
    auto mine = [&](int b) { return in + size_t((b % n + n) % n) * block_bytes; };
    if (n == 1) {
        ctx.copy(out, in, block_bytes);
        return ctx.wait_all();
    }

    const int left = (r + n - 1) % n, right = (r + 1) % n;
    const size_t nchunks = (count + chunk - 1) / chunk;
    auto len = [&](size_t c) { return std::min(chunk, count - c * chunk); };

    for (size_t c = 0; c < nchunks; ++c) {
        VCCL_RETURN_IF_ERROR(ctx.isend(right, mine(r - 1) + c * chunk * ts, len(c) * ts));
    }

    char* slots = static_cast<char*>(ctx.scratch(kDepth * chunk * ts));
    char* acc[2] = {nullptr, nullptr};
    if (n > 2) {
        acc[0] = static_cast<char*>(ctx.scratch(block_bytes));
        acc[1] = static_cast<char*>(ctx.scratch(block_bytes));
    }
    // Receive i covers step i / nchunks, chunk i % nchunks; fwd_ids[i] is the send of its partial.
    const size_t total = size_t(n - 1) * nchunks;
    std::vector<CollCtx::ReqId> recv_ids(total), fwd_ids(total, -1);
    size_t posted = 0;
    for (size_t i = 0; i < total; ++i) {
        for (; posted < total && posted < i + kDepth; ++posted) {
            VCCL_RETURN_IF_ERROR(ctx.irecv(left, slots + (posted % kDepth) * chunk * ts,
                                           len(posted % nchunks) * ts, &recv_ids[posted]));
        }
        VCCL_RETURN_IF_ERROR(ctx.wait(recv_ids[i]));
        const int t = int(i / nchunks);
        const size_t c = i % nchunks, off = c * chunk * ts;
        const char* slot = slots + (i % kDepth) * chunk * ts;
        const char* own = mine(r - t - 2) + off;
        if (t == n - 2) {
            ctx.reduce(out + off, slot, own, len(c));
            ctx.finish_avg(out + off, len(c));
            continue;
        }
        char* dst = acc[t % 2] + off;
        if (t >= 2) VCCL_RETURN_IF_ERROR(ctx.wait(fwd_ids[i - 2 * nchunks])); // same chunk, two steps back
        ctx.reduce(dst, slot, own, len(c));
        VCCL_RETURN_IF_ERROR(ctx.isend(right, dst, len(c) * ts, &fwd_ids[i]));
    }
    return ctx.wait_all();
}

} // namespace

const Algorithm kReduceScatterRing = {CollType::ReduceScatter, "ring",
                                      "n-1 ring steps, chunk-pipelined; bandwidth-optimal",
    "always", reducescatter_ring};

} // namespace vccl
