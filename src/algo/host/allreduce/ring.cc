/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Ring allreduce: a reduce-scatter followed by an allgather around the ring r -> r+1, moving 2(n-1)/n of
 * the buffer per rank, the bandwidth optimum.
 *
 * The buffer is split into n blocks (block_range) and every block into chunks of chunk_elems(). At step t
 * rank r receives from its left one block:
 *   reduce-scatter, t < n-1:   block r-t-1, reduced into recvbuf with this rank's own contribution;
 *   allgather, t = n-1+u:      block r-u, final values, received straight into recvbuf.
 * Whatever is received at step t is exactly what is sent at step t+1, so each chunk is forwarded as soon as
 * it is ready: chunk c of a block travels on while chunk c+1 is still in flight. After the last
 * reduce-scatter step rank r owns block r+1 in final form (average applied there once, before it is sent).
 *
 * Message order per link is the order of (step, chunk); receives are posted kDepth ahead of processing.
 * Reduce-scatter receives land in scratch slots; allgather receives land in recvbuf, in regions this rank
 * sent from earlier, so each such receive first waits for that send.
 */
#include <algorithm>
#include <vector>

#include "algo/algo.h"
#include "core/status.h"

namespace vccl {
namespace {

constexpr size_t kDepth = 4; // receives in flight ahead of the one being processed

struct Item {
    int step;
    size_t chunk; // index of the chunk within its block
    size_t begin; // first element
    size_t count;
};

vcclResult_t allreduce_ring(CollCtx& ctx, const CollArgs& args) {
    const int n = ctx.nranks(), r = ctx.rank();
    const size_t ts = ctx.type_size(), count = args.count;
    const char* in = static_cast<const char*>(args.sendbuf);
    char* out = static_cast<char*>(args.recvbuf);
    if (count == 0) return vcclSuccess;
    if (n == 1) {
        ctx.copy(out, in, count * ts); // the average over one rank is the value itself
        return ctx.wait_all();
    }
    const int left = (r + n - 1) % n, right = (r + 1) % n, steps = 2 * (n - 1);
    const size_t chunk = ctx.chunk_elems();
    auto block_of = [&](int t) { return ((t < n - 1 ? r - t - 1 : r - (t - (n - 1))) % n + n) % n; };

    // The receive plan, in link order. Empty blocks (count < n) contribute nothing on either side.
    std::vector<Item> items;
    std::vector<size_t> step_start(size_t(steps) + 1);
    for (int t = 0; t < steps; ++t) {
        step_start[size_t(t)] = items.size();
        size_t b, e;
        block_range(count, n, block_of(t), &b, &e);
        for (size_t off = b, c = 0; off < e; off += chunk, ++c) items.push_back({t, c, off, std::min(chunk, e - off)});
    }
    step_start[size_t(steps)] = items.size();

    // Step 0: this rank's own block r, straight from sendbuf.
    std::vector<CollCtx::ReqId> first_sends;
    {
        size_t b, e;
        block_range(count, n, r, &b, &e);
        for (size_t off = b; off < e; off += chunk) {
            CollCtx::ReqId id;
            VCCL_RETURN_IF_ERROR(ctx.isend(right, in + off * ts, std::min(chunk, e - off) * ts, &id));
            first_sends.push_back(id);
        }
    }

    char* slots = static_cast<char*>(ctx.scratch(kDepth * chunk * ts));
    std::vector<CollCtx::ReqId> recv_ids(items.size(), -1), fwd_ids(items.size(), -1);
    size_t posted = 0, next = 0;

    auto post_ahead = [&]() -> vcclResult_t {
        while (posted < items.size() && posted < next + kDepth) {
            const Item& it = items[posted];
            void* dst;
            if (it.step < n - 1) {
                dst = slots + (posted % kDepth) * chunk * ts; // its previous user (posted - kDepth) is done
            } else {
                // recvbuf region of block r-u was sent from at step u (or step 0 in place): wait for that.
                int u = it.step - (n - 1);
                CollCtx::ReqId dep = -1;
                if (u == 0) {
                    if (in == out) dep = first_sends[it.chunk];
                } else {
                    size_t q = step_start[size_t(u - 1)] + it.chunk;
                    if (q >= next) break; // that send is not posted yet; retry after more processing
                    dep = fwd_ids[q];
                }
                if (dep >= 0) VCCL_RETURN_IF_ERROR(ctx.wait(dep));
                dst = out + it.begin * ts;
            }
            VCCL_RETURN_IF_ERROR(ctx.irecv(left, dst, it.count * ts, &recv_ids[posted]));
            ++posted;
        }
        return vcclSuccess;
    };

    for (next = 0; next < items.size(); ++next) {
        VCCL_RETURN_IF_ERROR(post_ahead()); // always reaches `next`: its dependency is an earlier item
        const Item& it = items[next];
        VCCL_RETURN_IF_ERROR(ctx.wait(recv_ids[next]));
        char* dst = out + it.begin * ts;
        if (it.step < n - 1) {
            ctx.reduce(dst, in + it.begin * ts, slots + (next % kDepth) * chunk * ts, it.count);
            if (it.step == n - 2) ctx.finish_avg(dst, it.count); // final value of the block this rank owns
        }
        if (it.step < steps - 1) VCCL_RETURN_IF_ERROR(ctx.isend(right, dst, it.count * ts, &fwd_ids[next]));
    }
    return ctx.wait_all();
}

} // namespace

const Algorithm kAllReduceRing = {CollType::AllReduce, "ring",
                                  "reduce-scatter then allgather around a ring, chunk-pipelined; bandwidth-optimal",
    "above VCCL_ALLREDUCE_SMALL_BYTES",
                                  allreduce_ring};

} // namespace vccl
