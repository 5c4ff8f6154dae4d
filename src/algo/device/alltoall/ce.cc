/* SPDX-License-Identifier: BSD-3-Clause */
/* AlltoAll on the copy engines: one batch of copies of each peer's block into that peer's output, and the local
 * block copied beside it (no kernel). */
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
    for (int p = 0; p < n; ++p) {
        if (p == rank) continue;
        ops.push_back(device_send(op, send + size_t(p) * block, block, p));
        ops.push_back(device_recv(op, recv + size_t(p) * block, block, p));
    }
    bool beside = false; // the local copy runs on the second stream
    VCCL_RETURN_IF_ERROR(
        local_copy_beside(dev, recv + size_t(rank) * block, send + size_t(rank) * block, block, op.stream, &beside));
    return join_beside(dev, op, beside, run_batch(dev, ops));
}

} // namespace

const DeviceAlgorithm kDeviceAlltoAllCe = {
    CollType::AlltoAll, "ce", "copy-engine copies of each peer's block into its output, no kernel",
    "above ll (and above 1 MiB a peer)",
    false, PreMulPlan::ScaledCopy, possible, run,
};

} // namespace vccl
