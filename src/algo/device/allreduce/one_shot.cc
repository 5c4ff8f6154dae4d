/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * AllReduce in one batch: every rank receives every peer's whole buffer into the reduction scratch and reduces the
 * n buffers in rank order, so every rank computes the same bits (floating-point sums depend on the order). Small
 * transfers cost their handshakes, not their bytes: one batch of transfers and one kernel.
 */
#include "algo/device/common.h"
#include "core/dtype.h"
#include "core/status.h"

namespace vccl {

namespace {

bool possible(const DevicePath&, const Op& op) { return op.coll.count > 0; }

vcclResult_t run(DevicePath& dev, const Op& op, bool peers_free) {
    const char* send = static_cast<const char*>(op.coll.sendbuf);
    char* recv = static_cast<char*>(op.coll.recvbuf);
    const size_t bytes = op.coll.count * dtype_size(op.coll.dtype);
    int rank = dev.rank, n = dev.nranks;
    void* scratch = nullptr;
    if (n > 1) VCCL_RETURN_IF_ERROR(reduction_scratch(dev, bytes * size_t(n - 1), op.stream, &scratch));
    std::vector<Transfer> ops;
    std::vector<const void*> srcs;
    int slot = 0;
    for (int p = 0; p < n; ++p) {
        if (p == rank) {
            srcs.push_back(send); // recv may alias it: the kernel reads each element before writing it
            continue;
        }
        char* dst = static_cast<char*>(scratch) + size_t(slot++) * bytes;
        ops.push_back(scratch_send(op, send, bytes, p, peers_free));
        ops.push_back(device_recv(op, dst, bytes, p));
        srcs.push_back(dst);
    }
    VCCL_RETURN_IF_ERROR(run_batch(dev, ops));
    return device_reduce_into(dev, op, op.stream, recv, srcs, op.coll.count);
}

} // namespace

const DeviceAlgorithm kDeviceAllReduceOneShot = {
    CollType::AllReduce, "one_shot", "every rank sends its whole buffer to every peer, one kernel reduces them all",
    "where the kernels do not take it, up to VCCL_ALLREDUCE_SMALL_BYTES",
    false, PreMulPlan::ScaledCopy, possible, run,
};

} // namespace vccl
