/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * AllReduce in pieces: the reduce-scatter of rsag on nearly equal blocks, cut into pieces whose reduction kernels
 * run on the communicator's second stream while the next piece moves, each reduced piece sent to every peer as soon
 * as its kernel ran (algo/device/pipeline.h; at most kAllReduceMaxPieces unless the scratch limit wants more).
 */
#include "algo/device/common.h"
#include "algo/device/pipeline.h"
#include "core/dtype.h"
#include "core/status.h"

namespace vccl {

namespace {

bool possible(const DevicePath&, const Op& op) { return op.coll.count > 0; }

vcclResult_t run(DevicePath& dev, const Op& op, bool peers_free) {
    const size_t count = op.coll.count, ts = dtype_size(op.coll.dtype);
    const char* send = static_cast<const char*>(op.coll.sendbuf);
    char* recv = static_cast<char*>(op.coll.recvbuf);
    const int rank = dev.rank, n = dev.nranks;
    // Forced (VCCL_ALGO) where the default takes one piece, it still runs in two.
    const int pieces = std::max(2, pipeline_pieces(dev, count * ts, kAllReduceMaxPieces));
    PartFn part = [count, n, pieces](int i, int c, size_t* off, size_t* elems) {
        size_t b, e, pb, pe;
        block_range(count, n, i, &b, &e);
        block_range(e - b, pieces, c, &pb, &pe);
        *off = b + pb;
        *elems = pe - pb;
    };
    auto out = [&](int c) {
        size_t off, elems;
        part(rank, c, &off, &elems);
        return recv + off * ts;
    };
    auto all_gather_piece = [&](int c) {
        size_t off, elems;
        part(rank, c, &off, &elems);
        std::vector<Transfer> ops;
        for (int p = 0; p < n; ++p) {
            if (p == rank) continue;
            size_t poff, pelems;
            part(p, c, &poff, &pelems);
            if (elems > 0) ops.push_back(all_gather_send(op, recv + off * ts, elems * ts, p));
            if (pelems > 0) ops.push_back(device_recv(op, recv + poff * ts, pelems * ts, p));
        }
        return run_batch(dev, ops);
    };
    VCCL_RETURN_IF_ERROR(reduce_scatter_pieces(dev, op, send, ts, pieces, part, out, all_gather_piece, peers_free));
    // The last piece's all-gather waited for every peer's DONE after all its reductions, if every peer has a part
    // of that piece (so sent one).
    bool every_part = true;
    for (int i = 0; i < n; ++i) {
        size_t off, elems;
        part(i, pieces - 1, &off, &elems);
        every_part = every_part && elems > 0;
    }
    if (every_part) set_peers_scratch_waited(dev, op);
    return vcclSuccess;
}

} // namespace

const DeviceAlgorithm kDeviceAllReducePieces = {
    CollType::AllReduce, "pieces", "rsag in pieces, each piece's kernel beside the next piece's transfers",
    "from 2 x VCCL_REDUCE_PIPELINE_BYTES on (2 pieces; more where they would hold over VCCL_REDUCE_SCRATCH_BYTES)",
    false, PreMulPlan::OwnBlock, possible, run,
};

} // namespace vccl
