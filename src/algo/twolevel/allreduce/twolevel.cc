/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Two-level allreduce over H hosts of G ranks. Large messages: a reduce-scatter inside each host leaves local rank
 * g with the host's partial of block g (count/G elements); local rank g of every host then allreduces that block
 * over rail g (ring, or recursive doubling when the block is small); an allgather inside each host spreads the
 * blocks. Each rail carries 2(H-1)/H of S/G instead of the S a flat ring's host-crossing hops carry. The count % G
 * elements that do not fill a block are allreduced flat (fewer elements than ranks: one latency-bound exchange).
 *
 * Small messages (up to VCCL_ALLREDUCE_SMALL_BYTES): the whole buffer is allreduced inside the host and then over
 * every rail, two latency-bound phases with the same number of rounds as a flat recursive doubling, the
 * inter-host round on every rail at once.
 *
 * Every block's final value is computed on one rank or by a recursive doubling that all its members compute
 * alike, so all ranks end bit-identical.
 */
#include "algo/twolevel/common.h"
#include "core/status.h"

namespace vccl {
namespace {

vcclResult_t allreduce_twolevel(CollCtx& ctx, const CollArgs& args) {
    const HostGroups* hg = twolevel::layout(ctx);
    if (hg == nullptr) return twolevel::run_flat(ctx, args);
    const size_t count = args.count, ts = ctx.type_size();
    if (count == 0) return vcclSuccess;
    const int r = ctx.rank(), G = hg->ranks_per_host(), g = hg->local_rank(r);
    const std::vector<int>& host = hg->host_ranks(hg->host_of(r));
    const std::vector<int>& rail = hg->rail_ranks(g);
    const vcclRedOp_t op = twolevel::phase_op(args.op);
    char* out = static_cast<char*>(args.recvbuf);
    const size_t q = count / size_t(G); // elements per block

    if (count * ts <= ctx.settings().small_bytes || q == 0) {
        VCCL_RETURN_IF_ERROR(twolevel::run_phase(ctx, host, {CollType::AllReduce, args.sendbuf, out, count,
                                                             args.dtype, op, 0}));
        VCCL_RETURN_IF_ERROR(twolevel::run_phase(ctx, rail, {CollType::AllReduce, out, out, count, args.dtype, op, 0}));
        ctx.finish_avg(out, count);
        return ctx.wait_all();
    }
    char* mine = out + size_t(g) * q * ts;
    VCCL_RETURN_IF_ERROR(twolevel::run_phase(ctx, host, {CollType::ReduceScatter, args.sendbuf, mine, q, args.dtype,
                                                         op, 0}));
    VCCL_RETURN_IF_ERROR(twolevel::run_phase(ctx, rail, {CollType::AllReduce, mine, mine, q, args.dtype, op, 0}));
    ctx.finish_avg(mine, q);
    VCCL_RETURN_IF_ERROR(twolevel::run_phase(ctx, host, {CollType::AllGather, mine, out, q, args.dtype, op, 0}));
    const size_t done = q * size_t(G);
    if (done < count) {
        // In place the tail of sendbuf is still the input: the phases above touched only the blocks.
        CollArgs tail = args;
        tail.sendbuf = static_cast<const char*>(args.sendbuf) + done * ts;
        tail.recvbuf = out + done * ts;
        tail.count = count - done;
        VCCL_RETURN_IF_ERROR(kAllReduceRecursiveDoubling.run(ctx, tail));
    }
    return ctx.wait_all();
}

} // namespace

const Algorithm kAllReduceTwoLevel = {
    CollType::AllReduce, "twolevel",
    "across hosts: reduce-scatter in each host, allreduce of 1/G per rail between hosts, allgather in each host",
    "more than one host with the same number (> 1) of ranks on each", allreduce_twolevel};

} // namespace vccl
