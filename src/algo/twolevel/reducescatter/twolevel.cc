/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Two-level reduce-scatter over H hosts of G ranks: the input blocks are regrouped so that the H blocks bound for
 * local rank l of every host lie together; a reduce-scatter inside the host (H blocks per rank) leaves local rank
 * g with the host's partials of the blocks of rail g; a reduce-scatter over rail g finishes them. Each rail
 * carries (H-1)/H of S/G per rank.
 */
#include "algo/twolevel/common.h"
#include "core/status.h"

namespace vccl {
namespace {

vcclResult_t reducescatter_twolevel(CollCtx& ctx, const CollArgs& args) {
    const HostGroups* hg = twolevel::layout(ctx);
    if (hg == nullptr) return twolevel::run_flat(ctx, args);
    const size_t count = args.count, bb = count * ctx.type_size();
    if (count == 0) return vcclSuccess;
    const int r = ctx.rank(), G = hg->ranks_per_host(), H = hg->nhosts(), g = hg->local_rank(r);
    const vcclRedOp_t op = twolevel::phase_op(args.op);
    const char* in = static_cast<const char*>(args.sendbuf);
    // Read before anything is written: in place, recvbuf lies inside sendbuf.
    char* grouped = static_cast<char*>(ctx.scratch(size_t(H) * size_t(G) * bb));
    for (int l = 0; l < G; ++l) {
        for (int h = 0; h < H; ++h) {
            ctx.copy(grouped + (size_t(l) * size_t(H) + size_t(h)) * bb, in + size_t(hg->rail_ranks(l)[size_t(h)]) * bb,
                     bb);
        }
    }
    char* partial = static_cast<char*>(ctx.scratch(size_t(H) * bb));
    VCCL_RETURN_IF_ERROR(twolevel::run_phase(ctx, hg->host_ranks(hg->host_of(r)),
                                             {CollType::ReduceScatter, grouped, partial, size_t(H) * count,
                                              args.dtype, op, 0}));
    VCCL_RETURN_IF_ERROR(twolevel::run_phase(ctx, hg->rail_ranks(g), {CollType::ReduceScatter, partial, args.recvbuf,
                                                                      count, args.dtype, op, 0}));
    ctx.finish_avg(args.recvbuf, count);
    return ctx.wait_all();
}

} // namespace

const Algorithm kReduceScatterTwoLevel = {
    CollType::ReduceScatter, "twolevel",
    "across hosts: reduce-scatter in each host of the blocks of every rail, then reduce-scatter per rail",
    "more than one host with the same number (> 1) of ranks on each", reducescatter_twolevel};

} // namespace vccl
