/* SPDX-License-Identifier: BSD-3-Clause */
/* Reduce on the copy engines: every rank sends its buffer into the root's reduction scratch, whose kernel reduces
 * them into its output. */
#include "algo/device/common.h"
#include "core/dtype.h"
#include "core/status.h"

namespace vccl {

namespace {

bool possible(const DevicePath&, const Op& op) { return op.coll.count > 0; }

vcclResult_t run(DevicePath& dev, const Op& op, bool peers_free) {
    const CollArgs& a = op.coll;
    const char* send = static_cast<const char*>(a.sendbuf);
    const size_t bytes = a.count * dtype_size(a.dtype);
    const int rank = dev.rank, n = dev.nranks;
    if (rank != a.root) return run_batch(dev, {scratch_send(op, send, bytes, a.root, peers_free)});
    void* scratch = nullptr;
    if (n > 1) VCCL_RETURN_IF_ERROR(reduction_scratch(dev, bytes * size_t(n - 1), op.stream, &scratch));
    std::vector<Transfer> ops;
    std::vector<const void*> srcs = {send};
    int slot = 0;
    for (int p = 0; p < n; ++p) {
        if (p == rank) continue;
        char* dst = static_cast<char*>(scratch) + size_t(slot++) * bytes;
        ops.push_back(device_recv(op, dst, bytes, p));
        srcs.push_back(dst);
    }
    VCCL_RETURN_IF_ERROR(run_batch(dev, ops));
    return device_reduce_into(dev, op, op.stream, a.recvbuf, srcs, a.count);
}

} // namespace

const DeviceAlgorithm kDeviceReduceCe = {
    CollType::Reduce, "ce", "every rank's buffer into the root's reduction scratch, one kernel on the root",
    "above ll",
    false, PreMulPlan::ScaledCopy, possible, run,
};

} // namespace vccl
