/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What the two-level algorithms share. Each is composed of one-host phases among a host's ranks and inter-host
 * phases among the ranks of one local index g on every host (rail g: local rank g of each host talks only to
 * local rank g of the others, over its own NIC). A phase runs an existing flat algorithm, picked by the default
 * rules for its size and member count, inside a CollSubgroup.
 *
 * Two levels need the same number G > 1 of ranks on more than one host; elsewhere (one host, one rank per host,
 * uneven hosts) the algorithms run the flat default instead, which is then at least as good.
 */
#ifndef VCCL_ALGO_TWOLEVEL_COMMON_H_
#define VCCL_ALGO_TWOLEVEL_COMMON_H_

#include <vector>

#include "algo/algo.h"
#include "algo/host_groups.h"

namespace vccl {
namespace twolevel {

/* The layout, when two levels apply to this collective's ranks; NULL otherwise. */
const HostGroups* layout(const CollCtx& ctx);
/* The collective as the flat default runs it over every rank. */
vcclResult_t run_flat(CollCtx& ctx, const CollArgs& args);
/* One phase among `members` (communicator ranks, this one among them) with the default flat algorithm. */
vcclResult_t run_phase(CollCtx& ctx, const std::vector<int>& members, const CollArgs& args);
/* Phases reduce with this op: an average is a sum until the end, where it is divided by every rank once. */
inline vcclRedOp_t phase_op(vcclRedOp_t op) { return op == vcclAvg ? vcclSum : op; }

} // namespace twolevel
} // namespace vccl

#endif
