/* SPDX-License-Identifier: BSD-3-Clause */
/* ReduceScatter in pieces: blocks cut into pieces whose reduction kernels run on the communicator's second stream
 * while the next piece moves (algo/device/pipeline.h; up to kReduceMaxPieces). */
#include "algo/device/common.h"
#include "algo/device/pipeline.h"
#include "algo/device/reduce_pieces.h"
#include "core/dtype.h"

namespace vccl {

namespace {

bool possible(const DevicePath&, const Op& op) { return op.coll.count > 0; }

vcclResult_t run(DevicePath& dev, const Op& op, bool peers_free) {
    const size_t count = op.coll.count, ts = dtype_size(op.coll.dtype);
    char* recv = static_cast<char*>(op.coll.recvbuf);
    // Forced (VCCL_ALGO) where the default takes one piece, it still runs in two.
    const int pieces = std::max(2, pipeline_pieces(dev, count * ts * size_t(dev.nranks), kReduceMaxPieces));
    PartFn part = [count, pieces](int i, int c, size_t* off, size_t* elems) {
        size_t pb, pe;
        block_range(count, pieces, c, &pb, &pe);
        *off = size_t(i) * count + pb;
        *elems = pe - pb;
    };
    auto out = [&](int c) {
        size_t pb, pe;
        block_range(count, pieces, c, &pb, &pe);
        return recv + pb * ts;
    };
    return reduce_scatter_pieces(dev, op, static_cast<const char*>(op.coll.sendbuf), ts, pieces, part, out,
                                 [](int) { return vcclSuccess; }, peers_free);
}

} // namespace

const DeviceAlgorithm kDeviceReduceScatterPieces = {
    CollType::ReduceScatter, "pieces", "blocks in pieces, each piece's kernel beside the next piece's transfers",
    "from 2 x VCCL_REDUCE_PIPELINE_BYTES of input on (up to 8 pieces)",
    false, PreMulPlan::OwnBlock, possible, run,
};

} // namespace vccl
