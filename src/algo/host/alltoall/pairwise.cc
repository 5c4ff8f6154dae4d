/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Pairwise-exchange alltoall: n-1 steps; at step s rank r sends block r+s to rank r+s and receives block
 * r-s from rank r-s (any n, no power-of-two requirement), so every rank talks to one peer at a time and no
 * link carries two messages in one direction at once.
 * In place, the outgoing blocks are first copied to scratch: the block sent to r+s would otherwise be
 * overwritten by the step that receives from r+s.
 */
#include "algo/algo.h"
#include "core/status.h"

namespace vccl {
namespace {

vcclResult_t alltoall_pairwise(CollCtx& ctx, const CollArgs& args) {
    const int n = ctx.nranks(), r = ctx.rank();
    const size_t bb = args.count * ctx.type_size(); // bytes per block
    const char* src = static_cast<const char*>(args.sendbuf);
    char* out = static_cast<char*>(args.recvbuf);
    if (args.count == 0) return vcclSuccess;

    if (src == out && n > 1) {
        char* copy = static_cast<char*>(ctx.scratch(size_t(n) * bb));
        ctx.copy(copy, src, size_t(n) * bb);
        src = copy;
    }
    ctx.copy(out + size_t(r) * bb, src + size_t(r) * bb, bb);
    for (int s = 1; s < n; ++s) {
        const int to = (r + s) % n, from = (r - s + n) % n;
        VCCL_RETURN_IF_ERROR(ctx.sendrecv(to, src + size_t(to) * bb, bb, from, out + size_t(from) * bb, bb));
    }
    return ctx.wait_all();
}

} // namespace

const Algorithm kAlltoAllPairwise = {CollType::AlltoAll, "pairwise",
                                     "n-1 pairwise exchange steps (rank r+s and r-s at step s)",
    "always", alltoall_pairwise};

} // namespace vccl
