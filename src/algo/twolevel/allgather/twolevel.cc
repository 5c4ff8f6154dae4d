/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Two-level allgather over H hosts of G ranks: local rank g gathers the blocks of rail g over that rail (H blocks),
 * an allgather inside the host spreads every rail's blocks, and the result is put in rank order. Each rail
 * carries (H-1)/H of S/G per rank.
 */
#include "algo/twolevel/common.h"
#include "core/status.h"

namespace vccl {
namespace {

vcclResult_t allgather_twolevel(CollCtx& ctx, const CollArgs& args) {
    const HostGroups* hg = twolevel::layout(ctx);
    if (hg == nullptr) return twolevel::run_flat(ctx, args);
    const size_t count = args.count, bb = count * ctx.type_size();
    if (count == 0) return vcclSuccess;
    const int r = ctx.rank(), G = hg->ranks_per_host(), H = hg->nhosts(), g = hg->local_rank(r);
    char* out = static_cast<char*>(args.recvbuf);
    // recvbuf is written only at the end: in place, sendbuf lies inside it.
    char* rail = static_cast<char*>(ctx.scratch(size_t(H) * bb));
    VCCL_RETURN_IF_ERROR(twolevel::run_phase(ctx, hg->rail_ranks(g), {CollType::AllGather, args.sendbuf, rail, count,
                                                                      args.dtype, vcclSum, 0}));
    char* all = static_cast<char*>(ctx.scratch(size_t(H) * size_t(G) * bb));
    VCCL_RETURN_IF_ERROR(twolevel::run_phase(ctx, hg->host_ranks(hg->host_of(r)),
                                             {CollType::AllGather, rail, all, size_t(H) * count, args.dtype, vcclSum, 0}));
    for (int l = 0; l < G; ++l) {
        for (int h = 0; h < H; ++h) {
            ctx.copy(out + size_t(hg->rail_ranks(l)[size_t(h)]) * bb, all + (size_t(l) * size_t(H) + size_t(h)) * bb, bb);
        }
    }
    return ctx.wait_all();
}

} // namespace

const Algorithm kAllGatherTwoLevel = {
    CollType::AllGather, "twolevel", "across hosts: allgather per rail between hosts, then allgather in each host",
    "more than one host with the same number (> 1) of ranks on each", allgather_twolevel};

} // namespace vccl
