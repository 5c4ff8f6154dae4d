/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Pipelined chain reduce: root+1 -> root+2 -> ... -> root-1 -> root, in chunks of chunk_elems(). Each
 * rank receives the running partial of a chunk, adds its own contribution and passes it on while the next
 * chunk is in flight. Intermediate ranks work in kDepth scratch slots (recvbuf is only the root's); a slot
 * is reused once its chunk was sent on. The root reduces into recvbuf and applies the average once.
 */
#include <algorithm>
#include <vector>

#include "algo/algo.h"
#include "core/status.h"

namespace vccl {
namespace {

constexpr size_t kDepth = 4; // chunks received ahead of the one being reduced

vcclResult_t reduce_chain(CollCtx& ctx, const CollArgs& args) {
    const int n = ctx.nranks(), r = ctx.rank(), root = args.root;
    const size_t ts = ctx.type_size(), count = args.count, chunk = ctx.chunk_elems();
    const char* in = static_cast<const char*>(args.sendbuf);
    char* out = static_cast<char*>(args.recvbuf);
    if (count == 0) return vcclSuccess;
    if (n == 1) {
        ctx.copy(out, in, count * ts);
        return ctx.wait_all();
    }

    const int pos = (r - root - 1 + 2 * n) % n; // the root is last (n-1)
    const size_t nchunks = (count + chunk - 1) / chunk;
    auto len = [&](size_t c) { return std::min(chunk, count - c * chunk); };

    if (pos == 0) { // the head only sends its own data
        for (size_t c = 0; c < nchunks; ++c) {
            VCCL_RETURN_IF_ERROR(ctx.isend((r + 1) % n, in + c * chunk * ts, len(c) * ts));
        }
        return ctx.wait_all();
    }

    const int prev = (r - 1 + n) % n;
    const bool is_root = r == root;
    char* slots = static_cast<char*>(ctx.scratch(kDepth * chunk * ts));
    std::vector<CollCtx::ReqId> recv_ids(nchunks), send_ids(nchunks, -1);
    size_t posted = 0;
    for (size_t c = 0; c < nchunks; ++c) {
        for (; posted < nchunks && posted < c + kDepth; ++posted) {
            // The slot's previous chunk was reduced already; its send to the next rank must be done too.
            if (posted >= kDepth && send_ids[posted - kDepth] >= 0) {
                VCCL_RETURN_IF_ERROR(ctx.wait(send_ids[posted - kDepth]));
            }
            VCCL_RETURN_IF_ERROR(ctx.irecv(prev, slots + (posted % kDepth) * chunk * ts, len(posted) * ts,
                                           &recv_ids[posted]));
        }
        VCCL_RETURN_IF_ERROR(ctx.wait(recv_ids[c]));
        char* slot = slots + (c % kDepth) * chunk * ts;
        const char* mine = in + c * chunk * ts;
        if (is_root) {
            char* dst = out + c * chunk * ts;
            ctx.reduce(dst, slot, mine, len(c));
            ctx.finish_avg(dst, len(c));
        } else {
            ctx.reduce(slot, slot, mine, len(c));
            VCCL_RETURN_IF_ERROR(ctx.isend((r + 1) % n, slot, len(c) * ts, &send_ids[c]));
        }
    }
    return ctx.wait_all();
}

} // namespace

const Algorithm kReduceChain = {CollType::Reduce, "chain",
                                "chunk-pipelined chain ending at the root; bandwidth-optimal for large messages",
    "above VCCL_ALLREDUCE_SMALL_BYTES",
                                reduce_chain};

} // namespace vccl
