/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Ring allgather: n-1 steps around r -> r+1; at step s rank r receives block r-s-1 from its left and sends
 * block r-s (its own at step 0, then whatever it received the step before). Blocks are cut into chunks of
 * chunk_elems() and each chunk is forwarded as soon as it arrives. Every block is received exactly once,
 * straight into its place in recvbuf, and never overwritten, so sends and receives never share memory.
 */
#include <algorithm>
#include <vector>

#include "algo/algo.h"
#include "core/status.h"

namespace vccl {
namespace {

constexpr size_t kDepth = 8; // receives in flight ahead of the chunk being forwarded

vcclResult_t allgather_ring(CollCtx& ctx, const CollArgs& args) {
    const int n = ctx.nranks(), r = ctx.rank();
    const size_t ts = ctx.type_size(), count = args.count, chunk = ctx.chunk_elems();
    const size_t block_bytes = count * ts;
    const char* in = static_cast<const char*>(args.sendbuf);
    char* out = static_cast<char*>(args.recvbuf);
    if (count == 0) return vcclSuccess;

    const int left = (r + n - 1) % n, right = (r + 1) % n;
    const size_t nchunks = (count + chunk - 1) / chunk;
    auto len = [&](size_t c) { return std::min(chunk, count - c * chunk) * ts; };
    auto block = [&](int b) { return out + size_t((b % n + n) % n) * block_bytes; };

    if (n > 1) {
        for (size_t c = 0; c < nchunks; ++c) {
            VCCL_RETURN_IF_ERROR(ctx.isend(right, in + c * chunk * ts, len(c)));
        }
    }
    ctx.copy(block(r), in, block_bytes); // no-op in place

    // Receive i covers step i / nchunks, chunk i % nchunks.
    const size_t total = size_t(n - 1) * nchunks;
    std::vector<CollCtx::ReqId> recv_ids(total);
    size_t posted = 0;
    for (size_t i = 0; i < total; ++i) {
        for (; posted < total && posted < i + kDepth; ++posted) {
            int s = int(posted / nchunks);
            size_t c = posted % nchunks;
            VCCL_RETURN_IF_ERROR(ctx.irecv(left, block(r - s - 1) + c * chunk * ts, len(c), &recv_ids[posted]));
        }
        VCCL_RETURN_IF_ERROR(ctx.wait(recv_ids[i]));
        int s = int(i / nchunks);
        size_t c = i % nchunks;
        if (s < n - 2) VCCL_RETURN_IF_ERROR(ctx.isend(right, block(r - s - 1) + c * chunk * ts, len(c)));
    }
    return ctx.wait_all();
}

} // namespace

const Algorithm kAllGatherRing = {CollType::AllGather, "ring",
                                  "n-1 ring steps, chunk-pipelined; bandwidth-optimal",
    "always", allgather_ring};

} // namespace vccl
