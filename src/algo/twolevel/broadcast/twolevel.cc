/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Two-level broadcast: the root broadcasts over its own rail to the rank of its local index on every host, which
 * then broadcasts inside its host. The buffer crosses to each host once, on the root's rail.
 */
#include "algo/twolevel/common.h"
#include "core/status.h"

namespace vccl {
namespace {

vcclResult_t broadcast_twolevel(CollCtx& ctx, const CollArgs& args) {
    const HostGroups* hg = twolevel::layout(ctx);
    if (hg == nullptr) return twolevel::run_flat(ctx, args);
    if (args.count == 0) return vcclSuccess;
    const int r = ctx.rank(), root_local = hg->local_rank(args.root);
    if (hg->local_rank(r) == root_local) {
        VCCL_RETURN_IF_ERROR(twolevel::run_phase(ctx, hg->rail_ranks(root_local),
                                                 {CollType::Broadcast, args.sendbuf, args.recvbuf, args.count,
                                                  args.dtype, vcclSum, hg->host_of(args.root)}));
    }
    VCCL_RETURN_IF_ERROR(twolevel::run_phase(ctx, hg->host_ranks(hg->host_of(r)),
                                             {CollType::Broadcast, args.recvbuf, args.recvbuf, args.count, args.dtype,
                                              vcclSum, root_local}));
    return ctx.wait_all();
}

} // namespace

const Algorithm kBroadcastTwoLevel = {
    CollType::Broadcast, "twolevel", "across hosts: broadcast over the root's rail between hosts, then in each host",
    "more than one host with the same number (> 1) of ranks on each", broadcast_twolevel};

} // namespace vccl
