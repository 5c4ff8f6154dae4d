/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Binomial-tree broadcast: the whole buffer in ceil(log2(n)) rounds; the latency optimum for small
 * messages. Ranks are renumbered relative to the root (v = r - root mod n); v receives from v minus its
 * lowest set bit and then sends to v + 2^k for every 2^k below that bit, largest first.
 */
#include "algo/algo.h"
#include "core/status.h"

namespace vccl {
namespace {

vcclResult_t broadcast_binomial(CollCtx& ctx, const CollArgs& args) {
    const int n = ctx.nranks(), r = ctx.rank(), root = args.root;
    const size_t bytes = args.count * ctx.type_size();
    char* out = static_cast<char*>(args.recvbuf);
    if (args.count == 0) return vcclSuccess;

    const int v = (r - root + n) % n;
    // The root sends from sendbuf (its recvbuf is filled by a local copy); everyone else forwards recvbuf.
    const void* data = out;
    if (v == 0) {
        data = args.sendbuf;
        ctx.copy(out, args.sendbuf, bytes);
    }
    int mask = 1;
    while (mask < n) {
        if (v & mask) {
            CollCtx::ReqId id;
            VCCL_RETURN_IF_ERROR(ctx.irecv((v - mask + root) % n, out, bytes, &id));
            VCCL_RETURN_IF_ERROR(ctx.wait(id));
            break;
        }
        mask <<= 1;
    }
    for (mask >>= 1; mask > 0; mask >>= 1) {
        if (v + mask < n) VCCL_RETURN_IF_ERROR(ctx.isend((v + mask + root) % n, data, bytes));
    }
    return ctx.wait_all();
}

} // namespace

const Algorithm kBroadcastBinomial = {CollType::Broadcast, "binomial",
                                      "binomial tree from the root, whole buffer per edge; low latency",
    "up to VCCL_ALLREDUCE_SMALL_BYTES",
                                      broadcast_binomial};

} // namespace vccl
