/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * AllReduce as a reduce-scatter on nearly equal blocks (each rank reduces its block from all ranks' copies that
 * landed in its reduction scratch) followed by an all-gather of the reduced blocks straight into the peers'
 * receive buffers, without a READY handshake (algo/device/common.h, all_gather_send).
 */
#include "algo/device/common.h"
#include "algo/device/pipeline.h"
#include "core/dtype.h"
#include "core/status.h"

namespace vccl {

namespace {

bool possible(const DevicePath&, const Op& op) { return op.coll.count > 0; }

vcclResult_t run(DevicePath& dev, const Op& op, bool peers_free) {
    const CollArgs& a = op.coll;
    const size_t ts = dtype_size(a.dtype);
    const char* send = static_cast<const char*>(a.sendbuf);
    char* recv = static_cast<char*>(a.recvbuf);
    int rank = dev.rank, n = dev.nranks;
    size_t off, bytes;
    block_bytes(a.count, n, rank, ts, &off, &bytes);
    VCCL_RETURN_IF_ERROR(reduce_scatter_blocks(dev, op, send, recv + off, ts, a.count, false, 0, peers_free));
    std::vector<Transfer> ops;
    for (int p = 0; p < n; ++p) {
        if (p == rank) continue;
        size_t poff, pbytes;
        block_bytes(a.count, n, p, ts, &poff, &pbytes);
        if (bytes > 0) ops.push_back(all_gather_send(op, recv + off, bytes, p));
        if (pbytes > 0) ops.push_back(device_recv(op, recv + poff, pbytes, p));
    }
    VCCL_RETURN_IF_ERROR(run_batch(dev, ops));
    if (a.count >= size_t(n)) set_peers_scratch_waited(dev, op); // every peer's block, so DONE, is there
    return vcclSuccess;
}

} // namespace

const DeviceAlgorithm kDeviceAllReduceRsag = {
    CollType::AllReduce, "rsag", "reduce-scatter into the reduction scratch, one kernel, all-gather into the peers",
    "above VCCL_ALLREDUCE_SMALL_BYTES and the kernels' sizes, below 2 x VCCL_REDUCE_PIPELINE_BYTES",
    false, PreMulPlan::OwnBlock, possible, run,
};

} // namespace vccl
