/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Stream memory operations: flag writes held back to go with the stream's next memory operation (one
 * driver call for both), batched through cuStreamBatchMemOp where the driver has it.
 */
#include "transport/cuda_ipc/cuda_ipc_p2p.h"

#if VCCL_HAVE_CUDA

#include <algorithm>
#include <cstring>

#include "device/device_scope.h"

namespace vccl {

const DriverApi& driver() { return driver_api(); }

CUstreamBatchMemOpParams CudaIpcP2p::wait_op(CUdeviceptr addr, uint32_t value) {
    CUstreamBatchMemOpParams p;
    memset(&p, 0, sizeof(p));
    p.waitValue.operation = CU_STREAM_MEM_OP_WAIT_VALUE_32;
    p.waitValue.address = addr;
    p.waitValue.value = value;
    p.waitValue.flags = CU_STREAM_WAIT_VALUE_GEQ;
    return p;
}

CUstreamBatchMemOpParams CudaIpcP2p::write_op(CUdeviceptr addr, uint32_t value) {
    CUstreamBatchMemOpParams p;
    memset(&p, 0, sizeof(p));
    p.writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_32;
    p.writeValue.address = addr;
    p.writeValue.value = value;
    p.writeValue.flags = CU_STREAM_WRITE_VALUE_DEFAULT;
    return p;
}

CUresult CudaIpcP2p::issue_pending(CUstream stream, const CUstreamBatchMemOpParams* after, size_t after_count) {
    std::vector<CUstreamBatchMemOpParams> ops;
    std::vector<PendingWrite> mine;
    for (size_t i = 0; i < pending_.size();) {
        if (pending_[i].stream != stream) {
            ++i;
            continue;
        }
        const PendingWrite& w = pending_[i];
        ops.push_back(write_op(w.addr, w.value));
        mine.push_back(w);
        pending_.erase(pending_.begin() + long(i));
    }
    for (size_t k = 0; k < after_count; ++k) ops.push_back(after[k]);
    CUresult res = CUDA_SUCCESS;
    constexpr size_t kMaxBatch = 256; // the driver's limit per call
    for (size_t i = 0; i < ops.size() && res == CUDA_SUCCESS; i += kMaxBatch) {
        size_t count = std::min(kMaxBatch, ops.size() - i);
        if (driver().batch_mem_op != nullptr) {
            res = driver().batch_mem_op(stream, unsigned(count), &ops[i], 0);
        } else {
            for (size_t k = i; k < i + count && res == CUDA_SUCCESS; ++k) {
                const CUstreamBatchMemOpParams& p = ops[k];
                res = p.operation == CU_STREAM_MEM_OP_WAIT_VALUE_32
                          ? driver().wait_value(stream, p.waitValue.address, p.waitValue.value, p.waitValue.flags)
                          : driver().write_value(stream, p.writeValue.address, p.writeValue.value, p.writeValue.flags);
            }
        }
    }
    if (res != CUDA_SUCCESS) {
        // Some or all of these writes are not enqueued: their peers are told, as an immediate write's failure
        // would have told them.
        for (const PendingWrite& w : mine) {
            if (w.peer >= 0) notify_abandoned(w.peer, w.send, w.release, w.release_seq); // peer -1: a note
        }
    }
    return res;
}

vcclResult_t CudaIpcP2p::flush() {
    DeviceScope scope(device_);
    CUresult res = CUDA_SUCCESS;
    while (!pending_.empty()) {
        CUresult r = issue_pending(pending_.front().stream, nullptr);
        if (res == CUDA_SUCCESS) res = r;
    }
    retire_batch(); // after the batch's last copies and flag writes
    return res == CUDA_SUCCESS ? vcclSuccess : cu_fail("cuStreamWriteValue32 (ready/done)", res);
}

} // namespace vccl

#endif
