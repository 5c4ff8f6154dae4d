/* SPDX-License-Identifier: BSD-3-Clause */
#include "algo/device/pipeline.h"

#include <algorithm>

#include "algo/device/common.h"
#include "algo/device/reduce_pieces.h"
#include "core/status.h"

namespace vccl {

int pipeline_pieces(const DevicePath& dev, size_t bytes, int max_pieces) {
    return reduce_pieces(bytes, dev.nranks, dev.settings->reduce_pipeline_bytes, max_pieces,
                         dev.settings->reduce_scratch_bytes);
}

vcclResult_t reduce_scatter_blocks(DevicePath& dev, const Op& op, const char* send, char* out, size_t ts,
                                   size_t count_total, bool equal_blocks, size_t equal_count, bool peers_free) {
    int rank = dev.rank, n = dev.nranks;
    auto block = [&](int i, size_t* off, size_t* bytes) {
        if (equal_blocks) {
            *off = size_t(i) * equal_count * ts;
            *bytes = equal_count * ts;
        } else {
            block_bytes(count_total, n, i, ts, off, bytes);
        }
    };
    size_t my_off, my_bytes;
    block(rank, &my_off, &my_bytes);
    void* scratch = nullptr;
    if (n > 1) VCCL_RETURN_IF_ERROR(reduction_scratch(dev, my_bytes * size_t(n - 1), op.stream, &scratch));
    std::vector<Transfer> ops;
    std::vector<const void*> srcs = {own_input(op, send) + my_off};
    int slot = 0;
    for (int p = 0; p < n; ++p) {
        if (p == rank) continue;
        size_t off, bytes;
        block(p, &off, &bytes);
        // Blocks can be empty (fewer elements than ranks). Both sides know every block's size, so each
        // skips exactly the transfers its peer skips.
        if (bytes > 0) ops.push_back(scratch_send(op, send + off, bytes, p, peers_free));
        char* dst = static_cast<char*>(scratch) + size_t(slot++) * my_bytes;
        if (my_bytes > 0) ops.push_back(device_recv(op, dst, my_bytes, p));
        srcs.push_back(dst);
    }
    VCCL_RETURN_IF_ERROR(run_batch(dev, ops));
    return device_reduce_into(dev, op, op.stream, out, srcs, my_bytes / ts);
}

vcclResult_t reduce_scatter_pieces(DevicePath& dev, const Op& op, const char* send, size_t ts, int pieces,
                                   const PartFn& part, const std::function<char*(int c)>& out,
                                   const std::function<vcclResult_t(int c)>& then, bool peers_free) {
    int rank = dev.rank, n = dev.nranks;
    size_t piece_max = 0; // bytes of this rank's largest part
    for (int c = 0; c < pieces; ++c) {
        size_t off, elems;
        part(rank, c, &off, &elems);
        piece_max = std::max(piece_max, elems * ts);
    }
    const size_t half_bytes = piece_max * size_t(n - 1);
    void* scratch = nullptr;
    VCCL_RETURN_IF_ERROR(reduction_scratch(dev, 2 * half_bytes, op.stream, &scratch));
    SideStream& side = dev.side_stream;
    vcclResult_t r = vcclSuccess;
    bool forked = false;
    for (int c = 0; c < pieces && r == vcclSuccess; ++c) {
        size_t my_off, my_elems;
        part(rank, c, &my_off, &my_elems);
        char* half = static_cast<char*>(scratch) + size_t(c % 2) * half_bytes;
        std::vector<Transfer> ops;
        std::vector<const void*> srcs = {own_input(op, send) + my_off * ts};
        int slot = 0;
        for (int p = 0; p < n; ++p) {
            if (p == rank) continue;
            size_t off, elems;
            part(p, c, &off, &elems);
            // Pieces 0 and 1 land in the two halves, free as the scratch was (peers_free); from piece 2 on a half
            // is free only once the peer's reduction of the piece before has read it: its READY says so.
            if (elems > 0) ops.push_back(scratch_send(op, send + off * ts, elems * ts, p, peers_free && c < 2));
            char* dst = half + size_t(slot++) * piece_max;
            if (my_elems > 0) ops.push_back(device_recv(op, dst, my_elems * ts, p));
            srcs.push_back(dst);
        }
        r = run_batch(dev, ops);
        if (r == vcclSuccess) r = side.fork(op.stream);
        forked = forked || r == vcclSuccess;
        if (r == vcclSuccess) r = device_reduce_into(dev, op, side.stream(), out(c), srcs, my_elems);
        if (r == vcclSuccess) r = side.mark(c % 2);
        if (r == vcclSuccess && c > 0) r = side.wait_mark(op.stream, (c - 1) % 2);
        if (r == vcclSuccess && c > 0) r = then(c - 1);
    }
    if (r == vcclSuccess) r = side.wait_mark(op.stream, (pieces - 1) % 2);
    if (r == vcclSuccess) return then(pieces - 1);
    if (forked) side.join(op.stream); // what reached the second stream stays ordered before later work
    return r;
}

} // namespace vccl
