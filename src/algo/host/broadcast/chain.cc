/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Pipelined chain broadcast: root -> root+1 -> ... -> root-1, in chunks of chunk_elems(). Each rank
 * forwards a chunk as soon as it arrives, so for large messages the time approaches one buffer transfer
 * plus (n-2) chunk transfers. Receives land directly in recvbuf, kDepth chunks ahead.
 */
#include <algorithm>
#include <vector>

#include "algo/algo.h"
#include "core/status.h"

namespace vccl {
namespace {

constexpr size_t kDepth = 8; // receives in flight ahead of the chunk being forwarded

vcclResult_t broadcast_chain(CollCtx& ctx, const CollArgs& args) {
    const int n = ctx.nranks(), r = ctx.rank(), root = args.root;
    const size_t ts = ctx.type_size(), count = args.count, chunk = ctx.chunk_elems();
    char* out = static_cast<char*>(args.recvbuf);
    if (count == 0) return vcclSuccess;

    const int pos = (r - root + n) % n; // place in the chain; the root is 0
    const int next = pos < n - 1 ? (r + 1) % n : -1;
    const size_t nchunks = (count + chunk - 1) / chunk;
    auto len = [&](size_t c) { return std::min(chunk, count - c * chunk) * ts; };

    if (pos == 0) {
        const char* in = static_cast<const char*>(args.sendbuf);
        for (size_t c = 0; c < nchunks && next >= 0; ++c) {
            VCCL_RETURN_IF_ERROR(ctx.isend(next, in + c * chunk * ts, len(c)));
        }
        ctx.copy(out, in, count * ts);
        return ctx.wait_all();
    }

    const int prev = (r - 1 + n) % n;
    std::vector<CollCtx::ReqId> recv_ids(nchunks);
    size_t posted = 0;
    for (size_t c = 0; c < nchunks; ++c) {
        for (; posted < nchunks && posted < c + kDepth; ++posted) {
            VCCL_RETURN_IF_ERROR(ctx.irecv(prev, out + posted * chunk * ts, len(posted), &recv_ids[posted]));
        }
        VCCL_RETURN_IF_ERROR(ctx.wait(recv_ids[c]));
        if (next >= 0) VCCL_RETURN_IF_ERROR(ctx.isend(next, out + c * chunk * ts, len(c)));
    }
    return ctx.wait_all();
}

} // namespace

const Algorithm kBroadcastChain = {CollType::Broadcast, "chain",
                                   "chunk-pipelined chain from the root; bandwidth-optimal for large messages",
    "above VCCL_ALLREDUCE_SMALL_BYTES",
                                   broadcast_chain};

} // namespace vccl
