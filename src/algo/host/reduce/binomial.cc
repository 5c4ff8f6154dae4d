/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Binomial-tree reduce: the mirror of the binomial broadcast. With v = r - root mod n, v receives the
 * partial results of v + 2^k for each 2^k below its lowest set bit (smallest first), reduces them into its
 * own, and sends the total to v minus that bit. The root applies the average once, at the end.
 * Non-root ranks never touch recvbuf (it may be NULL there); they accumulate in scratch.
 */
#include "algo/algo.h"
#include "core/status.h"

namespace vccl {
namespace {

vcclResult_t reduce_binomial(CollCtx& ctx, const CollArgs& args) {
    const int n = ctx.nranks(), r = ctx.rank(), root = args.root;
    const size_t count = args.count, bytes = count * ctx.type_size();
    char* out = static_cast<char*>(args.recvbuf);
    if (count == 0) return vcclSuccess;

    const int v = (r - root + n) % n;
    const char* cur = static_cast<const char*>(args.sendbuf); // this rank's partial result so far
    char* acc = v == 0 ? out : nullptr;
    char* tmp = nullptr;
    for (int mask = 1; mask < n; mask <<= 1) {
        if (v & mask) {
            CollCtx::ReqId id;
            VCCL_RETURN_IF_ERROR(ctx.isend((v - mask + root) % n, cur, bytes, &id));
            return ctx.wait_all();
        }
        if ((v | mask) >= n) continue;
        if (tmp == nullptr) tmp = static_cast<char*>(ctx.scratch(bytes));
        if (acc == nullptr) acc = static_cast<char*>(ctx.scratch(bytes));
        CollCtx::ReqId id;
        VCCL_RETURN_IF_ERROR(ctx.irecv(((v | mask) + root) % n, tmp, bytes, &id));
        VCCL_RETURN_IF_ERROR(ctx.wait(id));
        ctx.reduce(acc, cur, tmp, count);
        cur = acc;
    }
    // Only the root gets here.
    ctx.copy(out, cur, bytes); // n == 1: sendbuf to recvbuf; otherwise cur is already recvbuf
    ctx.finish_avg(out, count);
    return ctx.wait_all();
}

} // namespace

const Algorithm kReduceBinomial = {CollType::Reduce, "binomial",
                                   "binomial tree into the root, whole buffer per edge; low latency",
    "up to VCCL_ALLREDUCE_SMALL_BYTES",
                                   reduce_binomial};

} // namespace vccl
