/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Transfers captured into CUDA graphs: the rendezvous of rendezvous.cc on graph words that every replay sets and
 * resets (transport/cuda_ipc/ipc_p2p.h says how they pair), stream memory operations and one copy, no kernel.
 */
#include "transport/cuda_ipc/cuda_ipc_p2p.h"

#if VCCL_HAVE_CUDA

#include <thread>

#include "core/status.h"
#include "core/test_point.h"
#include "device/device_scope.h"
#include "device/memory.h"

namespace vccl {

bool CudaIpcP2p::graph_slots(int peer, bool send, uint32_t count, uint32_t* first) {
    if (peer < 0 || peer >= nranks_) return false;
    uint32_t& next = send ? graph_sends_[size_t(peer)] : graph_recvs_[size_t(peer)];
    if (count > kGraphSlots - next) return false;
    *first = next;
    next += count;
    return true;
}

vcclResult_t CudaIpcP2p::post_graph_recv_ready(int peer, uint32_t slot, void* stream) {
    DeviceScope scope(device_);
    // With the stream's next memory operation (the batch's DONE wait at the latest), as an eager READY.
    defer_write(static_cast<CUstream>(stream), graph_addr(peer, kGraphReady, rank_, slot), 1, -1, false, kFail, 0);
    return vcclSuccess;
}

vcclResult_t CudaIpcP2p::post_graph_send(int peer, uint32_t slot, const void* buf, const P2pDescriptor& desc,
                                         void* stream) {
    DeviceScope scope(device_);
    if (test_point(test_key_, TestPoint::FailDirectSend)) {
        return set_last_error(vcclInternalError, "captured send to rank %d failed (test point)", peer);
    }
    // A replay may come at any time, also after this communicator is gone: the graph holds the mapping open (not
    // closed to make room for another handle either) until it is destroyed (graph_keep). Another communicator may
    // close it between map() and the hold: it is opened again (map() drops closed mappings), as post_send does.
    void* base = nullptr;
    ipc_handles::Ref ipc;
    for (int attempt = 0;; ++attempt) {
        VCCL_RETURN_IF_ERROR(map(peer, desc, stream, &base, &ipc));
        if (!ipc || ipc_handles::hold_for_graph(ipc)) break;
        if (attempt == 2) {
            return set_last_error(vcclInternalError, "rank %d's receive buffer was unmapped by another communicator "
                                  "three times in a row while a send to it was being captured", peer);
        }
    }
    if (ipc) graph_holds_.push_back(ipc);
    CUstream cs = static_cast<CUstream>(stream);
    const CUstreamBatchMemOpParams before[2] = {wait_op(graph_addr(rank_, kGraphReady, peer, slot), 1),
                                                write_op(graph_addr(rank_, kGraphReady, peer, slot), 0)};
    CUresult res = issue_pending(cs, before, 2);
    if (res != CUDA_SUCCESS) return cu_fail("cuStreamBatchMemOp (graph ready)", res);
    cudaError_t err = cudaMemcpyAsync(static_cast<char*>(base) + desc.offset, buf, desc.bytes,
                                      cudaMemcpyDeviceToDevice, static_cast<cudaStream_t>(stream));
    if (err != cudaSuccess) return cuda_fail("cudaMemcpyAsync to a peer GPU (captured)", err);
    // After the copy and fenced, as the eager DONE.
    defer_write(cs, graph_addr(peer, kGraphDone, rank_, slot), 1, -1, true, kFail, 0);
    return vcclSuccess;
}

vcclResult_t CudaIpcP2p::post_graph_recv_wait(int peer, uint32_t slot, void* stream) {
    DeviceScope scope(device_);
    const CUstreamBatchMemOpParams ops[2] = {wait_op(graph_addr(rank_, kGraphDone, peer, slot), 1),
                                             write_op(graph_addr(rank_, kGraphDone, peer, slot), 0)};
    CUresult res = issue_pending(static_cast<CUstream>(stream), ops, 2);
    return res == CUDA_SUCCESS ? vcclSuccess : cu_fail("cuStreamBatchMemOp (graph done)", res);
}

namespace {

/* What one captured batch's graph holds: the communicator's flags (GraphKeep) and the receive buffers' mappings,
 * let go when the graph is destroyed. That happens in CUDA's destructor callback, where CUDA may not be called:
 * the mappings are released (and maybe closed, which waits for the GPU) on a thread of their own. */
struct CapturedBatch {
    std::shared_ptr<void> flags;
    std::shared_ptr<std::atomic<int>> live; // the communicator's count of such graphs
    std::vector<ipc_handles::Ref> mappings;
    int device = -1;
    ~CapturedBatch() {
        if (live != nullptr) live->fetch_sub(1);
        if (mappings.empty()) return;
        std::vector<ipc_handles::Ref> held = std::move(mappings);
        const int on = device;
        std::thread([held, on] {
            relax_capture_for_this_thread(); // an application's capture elsewhere stays valid
            if (on >= 0) cudaSetDevice(on);
            for (const ipc_handles::Ref& m : held) ipc_handles::release_from_graph(m);
            cudaGetLastError();
        }).detach();
    }
};

} // namespace

bool CudaIpcP2p::graphs_hold_transfers() const {
    return graph_keep_ != nullptr && graph_keep_->p2p_graphs->load() > 0;
}

void CudaIpcP2p::release_graph_waits() {
    if (flags_ != nullptr && graphs_hold_transfers() && graph_keep_->release != nullptr) graph_keep_->release->start();
}

std::shared_ptr<void> CudaIpcP2p::graph_keep() {
    if (graph_keep_ == nullptr) graph_keep_ = std::make_shared<GraphKeep>();
    graph_keep_->device = device_;
    if (!graph_keep_->release_tried && flags_ != nullptr) {
        graph_keep_->release_tried = true;
        const size_t per_kind = size_t(nlocal_) * kGraphSlots; // GREADY words, then GDONE (cuda_ipc_p2p.h)
        graph_keep_->release = GraphWaitRelease::prepare(device_, rank_, flags_ + kRegions * size_t(nranks_), per_kind,
                                                         per_kind, kReadyGraceMs);
    }
    auto batch = std::make_shared<CapturedBatch>();
    batch->flags = graph_keep_;
    batch->live = graph_keep_->p2p_graphs;
    batch->live->fetch_add(1);
    batch->mappings.swap(graph_holds_);
    batch->device = device_;
    return batch;
}

} // namespace vccl

#endif
