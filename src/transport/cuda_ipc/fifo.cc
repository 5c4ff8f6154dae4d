/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The staging FIFO: a sender copies into slot n of the receiver and writes FULL(n); the receiver copies
 * the slot out and writes FREE(n), in credit batches (transport/cuda_ipc/fifo_credits.h).
 */
#include "transport/cuda_ipc/cuda_ipc_p2p.h"

#if VCCL_HAVE_CUDA

#include "core/status.h"
#include "core/test_point.h"
#include "device/device_scope.h"

namespace vccl {

vcclResult_t CudaIpcP2p::post_fifo_send(int peer, const void* buf, size_t bytes, void* stream) {
    DeviceScope scope(device_);
    const uint64_t n = fifo_sent_[peer] + 1;
    // Whatever failed, transfer n is given up: counted, FULL(n) published so the receiver goes on.
    auto give_up = [&](vcclResult_t failed) {
        fifo_sent_[peer] = n;
        notify_abandoned(peer, true, kFull, uint32_t(n), stream);
        return failed;
    };
    // Earlier READY/DONE writes of this stream first; if they cannot be enqueued the batch fails here.
    CUresult pending = issue_pending(static_cast<CUstream>(stream), nullptr);
    if (pending != CUDA_SUCCESS) return give_up(cu_fail("cuStreamWriteValue32 (ready/done)", pending));
    if (test_point(test_key_, TestPoint::FailDirectSend)) {
        return give_up(set_last_error(vcclInternalError, "FIFO send to rank %d failed (test point)", peer));
    }
    if (bytes > fifo_bytes(peer)) {
        return give_up(set_last_error(vcclInternalError, "FIFO send of %zu bytes to rank %d: slots hold %zu",
                                      bytes, peer, fifo_bytes(peer)));
    }
    CUstream cs = static_cast<CUstream>(stream);
    // Slot (m - 1) % slots is free once the receiver freed transfer m - slots. One wait covers a whole credit
    // batch (transport/cuda_ipc/fifo_credits.h): each enqueued stream operation costs the host 1-2 us.
    if (uint64_t wait = credits_.wait_before(n)) {
        const uint32_t credit = uint32_t(wait);
        CUresult res = driver().wait_value(cs, flag_addr(rank_, kFree, peer), credit, CU_STREAM_WAIT_VALUE_GEQ);
        if (res != CUDA_SUCCESS) return give_up(cu_fail("cuStreamWaitValue32 (FIFO credit)", res));
        fifo_credit_waited_[peer] = credit;
    }
    cudaError_t err = cudaMemcpyAsync(slot(peer, rank_, n), buf, bytes, cudaMemcpyDeviceToDevice,
                                      static_cast<cudaStream_t>(stream));
    if (err != cudaSuccess) return give_up(cuda_fail("cudaMemcpyAsync into a peer's FIFO slot", err));
    // Ordered after the copy and fenced (default write): the receiver sees the data with FULL.
    CUresult res = driver().write_value(cs, flag_addr(peer, kFull, rank_), uint32_t(n), CU_STREAM_WRITE_VALUE_DEFAULT);
    if (res != CUDA_SUCCESS) return give_up(cu_fail("cuStreamWriteValue32 (FIFO full)", res));
    fifo_sent_[peer] = n;
    return vcclSuccess;
}

vcclResult_t CudaIpcP2p::post_fifo_recv(int peer, void* buf, size_t bytes, bool to_host, void* stream) {
    DeviceScope scope(device_);
    CUresult pending = issue_pending(static_cast<CUstream>(stream), nullptr);
    if (pending != CUDA_SUCCESS) {
        abandon_fifo_recv(peer);
        return cu_fail("cuStreamWriteValue32 (ready/done)", pending);
    }
    const uint64_t n = fifo_recvd_[peer] + 1;
    if (test_point(test_key_, TestPoint::FailDirectRecv)) {
        abandon_fifo_recv(peer);
        return set_last_error(vcclInternalError, "FIFO receive from rank %d failed (test point)", peer);
    }
    CUstream cs = static_cast<CUstream>(stream);
    CUresult res = driver().wait_value(cs, flag_addr(rank_, kFull, peer), uint32_t(n), CU_STREAM_WAIT_VALUE_GEQ);
    if (res != CUDA_SUCCESS) {
        abandon_fifo_recv(peer);
        return cu_fail("cuStreamWaitValue32 (FIFO full)", res);
    }
    fifo_recvd_[peer] = n;
    fifo_full_waited_[peer] = uint32_t(n);
    if (buf != nullptr && bytes > 0) {
        cudaError_t err = cudaMemcpyAsync(buf, slot(rank_, peer, n), bytes, to_host ? cudaMemcpyDeviceToHost : cudaMemcpyDeviceToDevice,
                                          static_cast<cudaStream_t>(stream));
        if (err != cudaSuccess) { // the slot stays taken: the sender stalls when its credits are spent
            notify_abandoned(peer, false, kFail, 0);
            return cuda_fail("cudaMemcpyAsync from a FIFO slot", err);
        }
    }
    if (!credits_.free_after(n)) return vcclSuccess; // freed with the batch's last transfer
    res = driver().write_value(cs, flag_addr(peer, kFree, rank_), uint32_t(n), CU_STREAM_WRITE_VALUE_DEFAULT);
    if (res != CUDA_SUCCESS) {
        notify_abandoned(peer, false, kFail, 0);
        return cu_fail("cuStreamWriteValue32 (FIFO free)", res);
    }
    return vcclSuccess;
}

} // namespace vccl

#endif
