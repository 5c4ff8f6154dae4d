/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Rendezvous transfers: the receiver's stream writes READY into the sender's flags, the sender's stream
 * waits for it, copies into the mapped receive buffer and writes DONE, which the receiver's stream waits for.
 */
#include "transport/cuda_ipc/cuda_ipc_p2p.h"

#if VCCL_HAVE_CUDA

#include <optional>

#include "core/status.h"
#include "core/test_point.h"
#include "device/device_scope.h"

namespace vccl {

vcclResult_t CudaIpcP2p::post_recv_ready(int peer, void* stream, uint32_t* seq) {
    DeviceScope scope(device_);
    auto give_up = [&](vcclResult_t failed) {
        abandon_recv(peer);
        return failed;
    };
    if (test_point(test_key_, TestPoint::FailDirectRecv)) {
        return give_up(set_last_error(vcclInternalError, "direct receive from rank %d failed (test point)", peer));
    }
    uint32_t s = recv_seq_[peer] + 1;
    // Enqueued with the stream's next memory operation (issue_pending): one driver call for both.
    defer_write(static_cast<CUstream>(stream), flag_addr(peer, kReady, rank_), s, peer, false, kFail, 0);
    recv_seq_[peer] = s;
    *seq = s;
    return vcclSuccess;
}

vcclResult_t CudaIpcP2p::post_send(int peer, const void* buf, const P2pDescriptor& desc, void* stream,
                                   bool wait_ready) {
    DeviceScope scope(device_);
    uint32_t s = send_seq_[peer] + 1;
    // Whatever failed, transfer s is given up: counted (as if its READY wait had been enqueued, the peer
    // has written that READY) and the peer told.
    auto give_up = [&](vcclResult_t failed) {
        send_seq_[peer] = s;
        notify_abandoned(peer, true, kDone, s, stream);
        return failed;
    };
    if (test_point(test_key_, TestPoint::FailDirectSend)) {
        return give_up(set_last_error(vcclInternalError, "direct send to rank %d failed (test point)", peer));
    }
    // Another communicator may close this mapping to open its own handle (ipc_handles.h): checked open under
    // UseLock, which keeps it so until the copy is enqueued. Closed between map() and the check, it is
    // opened again (map() drops closed mappings).
    void* base = nullptr;
    std::optional<ipc_handles::UseLock> in_use;
    for (int attempt = 0;; ++attempt) {
        ipc_handles::Ref ipc;
        vcclResult_t mapped = map(peer, desc, stream, &base, &ipc);
        if (mapped != vcclSuccess) return give_up(mapped);
        in_use.emplace();
        if (!ipc || ipc->open.load()) break;
        in_use.reset();
        if (attempt == 2) {
            return give_up(set_last_error(vcclInternalError, "rank %d's receive buffer was unmapped by another "
                                          "communicator of this process three times in a row", peer));
        }
    }
    CUstream cs = static_cast<CUstream>(stream);
    // Left out, READY s is still written by the peer and still counted here, so the next wait (for s + 1,
    // or later: the waits are "at least") pairs as before. This stream's pending writes (its own READYs)
    // then go with its next memory operation, after the copy: later, and a peer that does wait for one
    // still gets it (the copy waits for nothing), one driver call fewer.
    if (wait_ready) {
        CUresult res = issue_pending(cs, wait_op(flag_addr(rank_, kReady, peer), s));
        if (res != CUDA_SUCCESS) return give_up(cu_fail("cuStreamWaitValue32 (ready)", res));
        ready_waited_[peer] = s; // release_waits goes by these: a READY no wait needs is not waited for
    }
    send_seq_[peer] = s;
    cudaError_t err = cudaMemcpyAsync(static_cast<char*>(base) + desc.offset, buf, desc.bytes,
                                      cudaMemcpyDeviceToDevice, static_cast<cudaStream_t>(stream));
    if (err != cudaSuccess) return give_up(cuda_fail("cudaMemcpyAsync to a peer GPU", err));
    // The default write is ordered after the copy and fenced, so the receiver sees the data with DONE.
    // Enqueued with the stream's next memory operation, at the latest by flush().
    defer_write(cs, flag_addr(peer, kDone, rank_), s, peer, true, kDone, s);
    test_point(test_key_, TestPoint::DirectSend);
    return vcclSuccess;
}

vcclResult_t CudaIpcP2p::post_recv_wait(int peer, uint32_t seq, void* stream, int note_word, uint32_t note_value) {
    DeviceScope scope(device_);
    CUstreamBatchMemOpParams ops[2] = {wait_op(flag_addr(rank_, kDone, peer), seq), {}};
    size_t count = 1;
    if (note_word >= 0 && note_word < notes_count_) ops[count++] = write_op(note_addr(note_word), note_value);
    CUresult res = issue_pending(static_cast<CUstream>(stream), ops, count);
    if (res != CUDA_SUCCESS) return cu_fail("cuStreamWaitValue32 (done)", res);
    done_waited_[peer] = seq;
    return vcclSuccess;
}

} // namespace vccl

#endif
