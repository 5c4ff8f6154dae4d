/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Alltoall by rail over H hosts of G ranks: the blocks for local rank l of every host first move inside the host
 * to local rank l (an alltoall of H blocks per peer there), which then sends them over its own rail l, one message
 * of G blocks per remote host (an alltoall over the rail). Inter-host traffic stays on one rail per pair of hosts
 * and rank, with H-1 messages per rank instead of (H-1)G.
 */
#include "algo/twolevel/common.h"
#include "core/status.h"

namespace vccl {
namespace {

vcclResult_t alltoall_twolevel(CollCtx& ctx, const CollArgs& args) {
    const HostGroups* hg = twolevel::layout(ctx);
    if (hg == nullptr) return twolevel::run_flat(ctx, args);
    const size_t count = args.count, bb = count * ctx.type_size();
    if (count == 0) return vcclSuccess;
    const int r = ctx.rank(), G = hg->ranks_per_host(), H = hg->nhosts(), g = hg->local_rank(r);
    const size_t n = size_t(G) * size_t(H);
    const char* in = static_cast<const char*>(args.sendbuf);
    char* out = static_cast<char*>(args.recvbuf);
    char* a = static_cast<char*>(ctx.scratch(n * bb));
    char* b = static_cast<char*>(ctx.scratch(n * bb));
    auto rank_at = [&](int h, int l) { return size_t(hg->rail_ranks(l)[size_t(h)]); };
    // a[l][h]: the block for rank (h, l). Read before anything is written: in place, recvbuf is sendbuf.
    for (int l = 0; l < G; ++l) {
        for (int h = 0; h < H; ++h) ctx.copy(a + (size_t(l) * size_t(H) + size_t(h)) * bb, in + rank_at(h, l) * bb, bb);
    }
    // b[l][h]: from local rank l of this host, for rank (h, g).
    VCCL_RETURN_IF_ERROR(twolevel::run_phase(ctx, hg->host_ranks(hg->host_of(r)),
                                             {CollType::AlltoAll, a, b, size_t(H) * count, args.dtype, vcclSum, 0}));
    // a[h][l]: for rank (h, g), from local rank l of this host.
    for (int h = 0; h < H; ++h) {
        for (int l = 0; l < G; ++l) ctx.copy(a + (size_t(h) * size_t(G) + size_t(l)) * bb, b + (size_t(l) * size_t(H) + size_t(h)) * bb, bb);
    }
    // b[h][l]: from rank (h, l).
    VCCL_RETURN_IF_ERROR(twolevel::run_phase(ctx, hg->rail_ranks(g),
                                             {CollType::AlltoAll, a, b, size_t(G) * count, args.dtype, vcclSum, 0}));
    for (int h = 0; h < H; ++h) {
        for (int l = 0; l < G; ++l) ctx.copy(out + rank_at(h, l) * bb, b + (size_t(h) * size_t(G) + size_t(l)) * bb, bb);
    }
    return ctx.wait_all();
}

} // namespace

const Algorithm kAlltoAllTwoLevel = {
    CollType::AlltoAll, "twolevel",
    "across hosts, by rail: blocks move in the host to the rank on their destination's rail, then cross on it",
    "more than one host with the same number (> 1) of ranks on each", alltoall_twolevel};

} // namespace vccl
