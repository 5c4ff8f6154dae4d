/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Recursive-doubling allreduce: log2(n) exchanges of the whole buffer, the latency optimum for small
 * messages. Works for any n: with p the largest power of two <= n and rem = n - p, the first 2*rem ranks
 * pair up (even into odd) so p ranks remain; those run the doubling; the folded ranks get the result back.
 *
 * Every pairwise reduce puts the lower rank's operand first, so all ranks compute bit-identical results
 * (floating-point addition is commutative for a fixed operand pair, and the pairings are symmetric).
 */
#include "algo/algo.h"
#include "core/status.h"

namespace vccl {
namespace {

vcclResult_t allreduce_recursive_doubling(CollCtx& ctx, const CollArgs& args) {
    const int n = ctx.nranks(), r = ctx.rank();
    const size_t count = args.count, bytes = count * ctx.type_size();
    const char* cur = static_cast<const char*>(args.sendbuf); // this rank's partial result so far
    char* out = static_cast<char*>(args.recvbuf);
    if (count == 0) return vcclSuccess;
    if (n == 1) {
        ctx.copy(out, cur, bytes);
        return ctx.wait_all();
    }
    int p = 1;
    while (p * 2 <= n) p *= 2;
    const int rem = n - p;
    char* tmp = static_cast<char*>(ctx.scratch(bytes));

    int vrank; // rank among the p that take part in the doubling, -1 when folded away
    if (r < 2 * rem) {
        if (r % 2 == 0) {
            // Hand the contribution to r+1 and wait for the result. The send must finish before the
            // receive may overwrite recvbuf, which is the same memory when in place.
            CollCtx::ReqId id;
            VCCL_RETURN_IF_ERROR(ctx.isend(r + 1, cur, bytes, &id));
            VCCL_RETURN_IF_ERROR(ctx.wait(id));
            VCCL_RETURN_IF_ERROR(ctx.irecv(r + 1, out, bytes, &id));
            return ctx.wait_all();
        }
        CollCtx::ReqId id;
        VCCL_RETURN_IF_ERROR(ctx.irecv(r - 1, tmp, bytes, &id));
        VCCL_RETURN_IF_ERROR(ctx.wait(id));
        ctx.reduce(out, tmp, cur, count);
        cur = out;
        vrank = r / 2;
    } else {
        vrank = r - rem;
    }

    for (int mask = 1; mask < p; mask <<= 1) {
        int vpeer = vrank ^ mask;
        int peer = vpeer < rem ? 2 * vpeer + 1 : vpeer + rem;
        VCCL_RETURN_IF_ERROR(ctx.sendrecv(peer, cur, bytes, peer, tmp, bytes));
        if (peer < r) {
            ctx.reduce(out, tmp, cur, count);
        } else {
            ctx.reduce(out, cur, tmp, count);
        }
        cur = out;
    }
    ctx.finish_avg(out, count);
    if (r < 2 * rem) VCCL_RETURN_IF_ERROR(ctx.isend(r - 1, out, bytes));
    return ctx.wait_all();
}

} // namespace

const Algorithm kAllReduceRecursiveDoubling = {
    CollType::AllReduce, "recursive_doubling",
    "log2(n) whole-buffer exchanges (non-powers of two fold into partners first); low latency",
    "up to VCCL_ALLREDUCE_SMALL_BYTES, or fewer elements than ranks",
    allreduce_recursive_doubling};

} // namespace vccl
