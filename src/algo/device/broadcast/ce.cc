/* SPDX-License-Identifier: BSD-3-Clause */
/* Broadcast on the copy engines: the root copies its buffer into every peer's output in one batch, and into its own
 * beside it (no kernel). */
#include "algo/device/common.h"
#include "core/dtype.h"
#include "core/status.h"

namespace vccl {

namespace {

bool possible(const DevicePath&, const Op& op) { return op.coll.count > 0; }

vcclResult_t run(DevicePath& dev, const Op& op, bool) {
    const CollArgs& a = op.coll;
    const size_t block = a.count * dtype_size(a.dtype);
    const char* send = static_cast<const char*>(a.sendbuf);
    char* recv = static_cast<char*>(a.recvbuf);
    const int rank = dev.rank, n = dev.nranks;
    std::vector<Transfer> ops;
    bool beside = false; // the local copy runs on the second stream
    if (rank == a.root) {
        for (int p = 0; p < n; ++p) {
            if (p != rank) ops.push_back(device_send(op, send, block, p));
        }
        VCCL_RETURN_IF_ERROR(local_copy_beside(dev, recv, send, block, op.stream, &beside));
    } else {
        ops.push_back(device_recv(op, recv, block, a.root));
    }
    return join_beside(dev, op, beside, run_batch(dev, ops));
}

} // namespace

const DeviceAlgorithm kDeviceBroadcastCe = {
    CollType::Broadcast, "ce", "copy-engine copies from the root into every peer's output, no kernel",
    "above ll",
    false, PreMulPlan::ScaledCopy, possible, run,
};

} // namespace vccl
