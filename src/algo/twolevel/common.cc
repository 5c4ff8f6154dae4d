/* SPDX-License-Identifier: BSD-3-Clause */
#include "algo/twolevel/common.h"

#include "core/status.h"

namespace vccl {
namespace twolevel {

const HostGroups* layout(const CollCtx& ctx) {
    const HostGroups* hosts = ctx.hosts();
    if (hosts == nullptr || hosts->nranks() != ctx.nranks() || !hosts->two_level()) return nullptr;
    return hosts;
}

vcclResult_t run_flat(CollCtx& ctx, const CollArgs& args) {
    const Algorithm* algo = algo_select(args, ctx.nranks(), ctx.settings());
    if (algo == nullptr) return set_last_error(vcclInternalError, "no flat algorithm for %s", coll_name(args.coll));
    return algo->run(ctx, args);
}

vcclResult_t run_phase(CollCtx& ctx, const std::vector<int>& members, const CollArgs& args) {
    const Algorithm* algo = algo_select(args, int(members.size()), ctx.settings());
    if (algo == nullptr) return set_last_error(vcclInternalError, "no flat algorithm for %s", coll_name(args.coll));
    CollSubgroup group(ctx, members, args.op);
    VCCL_RETURN_IF_ERROR(ctx.status());
    return algo->run(ctx, args);
}

} // namespace twolevel
} // namespace vccl
