/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Two-level reduce: every host reduces into its rank of the root's local index, and those ranks reduce over the
 * root's rail into the root. The buffer crosses from each host once. Ranks other than the root keep partials in
 * scratch (their recvbuf may be NULL).
 */
#include "algo/twolevel/common.h"
#include "core/status.h"

namespace vccl {
namespace {

vcclResult_t reduce_twolevel(CollCtx& ctx, const CollArgs& args) {
    const HostGroups* hg = twolevel::layout(ctx);
    if (hg == nullptr) return twolevel::run_flat(ctx, args);
    const size_t count = args.count;
    if (count == 0) return vcclSuccess;
    const int r = ctx.rank(), root_local = hg->local_rank(args.root);
    const bool on_rail = hg->local_rank(r) == root_local;
    const vcclRedOp_t op = twolevel::phase_op(args.op);
    void* partial = nullptr;
    if (on_rail) partial = r == args.root ? args.recvbuf : ctx.scratch(count * ctx.type_size());
    VCCL_RETURN_IF_ERROR(twolevel::run_phase(ctx, hg->host_ranks(hg->host_of(r)),
                                             {CollType::Reduce, args.sendbuf, partial, count, args.dtype, op,
                                              root_local}));
    if (on_rail) {
        VCCL_RETURN_IF_ERROR(twolevel::run_phase(ctx, hg->rail_ranks(root_local),
                                                 {CollType::Reduce, partial, r == args.root ? args.recvbuf : nullptr,
                                                  count, args.dtype, op, hg->host_of(args.root)}));
    }
    if (r == args.root) ctx.finish_avg(args.recvbuf, count);
    return ctx.wait_all();
}

} // namespace

const Algorithm kReduceTwoLevel = {
    CollType::Reduce, "twolevel", "across hosts: reduce in each host, then over the root's rail between hosts",
    "more than one host with the same number (> 1) of ranks on each", reduce_twolevel};

} // namespace vccl
