/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Destroy and abort: waits still pending on a peer that will never write its flag are released from
 * private streams, and everything is freed unless a stream stays blocked.
 */
#include "transport/cuda_ipc/cuda_ipc_p2p.h"

#if VCCL_HAVE_CUDA

#include <algorithm>
#include <chrono>
#include <thread>

#include "core/clock.h"
#include "core/log.h"
#include "device/device_scope.h"
#include "device/stream_order.h"
#include "device/vmm.h"

namespace vccl {

CudaIpcP2p::GraphKeep::~GraphKeep() {
    // This may be CUDA's destructor callback, where CUDA may not be called: the release stops and goes on a thread.
    if (flags == nullptr && peer_flags.empty() && control == nullptr && release == nullptr) return;
    uint32_t* own = flags;
    std::vector<uint32_t*> peers = std::move(peer_flags);
    int* words = const_cast<int*>(control);
    std::shared_ptr<GraphWaitRelease> writer = std::move(release);
    StreamOrder().run_when_done(
        [own, peers, words, writer]() mutable {
            if (writer != nullptr) writer->stop(); // no write into the flags once they are freed
            writer.reset();
            if (own != nullptr) cudaFree(own); // waits for the device: no replay still reads the mappings
            for (uint32_t* p : peers) cudaIpcCloseMemHandle(p);
            if (words != nullptr) cudaFreeHost(words);
            cudaGetLastError();
        },
        true, device);
}

CudaIpcP2p::~CudaIpcP2p() {
    DeviceScope scope(device_);
    // Graph replays released after abort or revoke may come at any time, each waiting for the release: nothing is
    // freed (cudaFree and cudaIpcCloseMemHandle wait for the device, and so for such a replay) until the last graph
    // holding send/recv is gone. This runs on a thread of its own then (comm_init.cc), not the caller's. At the
    // process's exit nothing is freed (the exit frees it all), as when a release did not land.
    if (graph_keep_ != nullptr && graph_keep_->release != nullptr && graph_keep_->release->started()) {
        while (graph_keep_->p2p_graphs->load() > 0 && !process_exiting()) {
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
        if (process_exiting()) stream_blocked_ = true;
    }
    // Graphs still hold kernels on the low-latency words: those stay for them (a replay finds the abort word set and
    // does nothing), the rest goes.
    if (graph_keep_ != nullptr && graph_keep_.use_count() > 1 && !stream_blocked_) {
        if (ll_control_ != nullptr) ll_control_[kLlAbort] = 1;
        cudaDeviceSynchronize(); // as cudaFree below would: copies a release let go land before the mappings close
        GraphKeep& keep = *graph_keep_;
        keep.device = device_;
        keep.flags = flags_;
        keep.control = ll_control_;
        for (size_t r = 0; r < peer_flags_.size(); ++r) {
            if (peer_flags_[r] != nullptr && int(r) != rank_) keep.peer_flags.push_back(peer_flags_[r]);
            peer_flags_[r] = nullptr;
        }
        flags_ = nullptr;
        ll_control_ = nullptr;
        VCCL_INFO(kLogDevice, "rank %d: CUDA graphs still hold low-latency collectives of this communicator: their "
                  "words stay allocated until the last such graph is destroyed", rank_);
    }
    // Not handed over: the flags are freed below, after the last write of the release.
    if (graph_keep_ != nullptr && graph_keep_->release != nullptr && flags_ != nullptr && !stream_blocked_) {
        graph_keep_->release->stop();
    }
    graph_keep_.reset();
    // A stream release_waits could not unblock would hold cudaFree (it synchronises the device) for ever:
    // leave everything allocated and mapped. Leaked mappings are not harmless (CUDA maps a peer's block
    // only once per process, so a later communicator could not map a new buffer at that address), which
    // is why this is only done when the release did not land; nor may another communicator close them
    // (ipc_handles::keep_for_good).
    if (stream_blocked_) {
        for (auto& per_peer : mappings_) {
            for (Mapping& m : per_peer) {
                if (m.vmm_size == 0) ipc_handles::keep_for_good(m.ipc);
            }
        }
        return;
    }
    // cudaFree first: it waits for the device, so a copy a release let go has landed before its
    // mapping is closed.
    if (flags_ != nullptr) cudaFree(flags_);
    for (auto& per_peer : mappings_) {
        for (Mapping& m : per_peer) unmap(m);
    }
    for (Retired& r : retired_) { // the device is idle (cudaFree above): their copies are done
        for (const View& v : r.views) vmm::unmap(v.ptr, v.size);
        for (cudaEvent_t ev : r.events) cudaEventDestroy(ev);
    }
    for (const View& v : retiring_) vmm::unmap(v.ptr, v.size);
    for (size_t r = 0; r < peer_flags_.size(); ++r) {
        if (peer_flags_[r] != nullptr && int(r) != rank_) cudaIpcCloseMemHandle(peer_flags_[r]);
    }
    if (flags_host_ != nullptr) cudaFreeHost(flags_host_);
    if (notes_host_ != nullptr) cudaFreeHost(notes_host_);
    if (ll_control_ != nullptr) cudaFreeHost(const_cast<int*>(ll_control_));
    for (cudaStream_t st : private_streams_) {
        if (st != nullptr) cudaStreamDestroy(st);
    }
    if (notify_stream_ != nullptr) cudaStreamDestroy(notify_stream_);
    cudaGetLastError(); // only our own calls above can have set it
}

int CudaIpcP2p::release_waits(int64_t wait_ms) {
    flush();
    // Abort, or destroy after a revoke: a graph's replay on this rank alone must not wait for its peers either.
    // (After a plain destroy the replays still pair with the peers'.)
    if (wait_ms == 0) release_graph_waits();
    const uint64_t until = now_ns() + uint64_t(wait_ms) * 1000000ull;
    int released = release_flag_waits(wait_ms);
    if (ll_control_ != nullptr) {
        // A low-latency kernel still waiting for a peer gets what is left of the same time (at least
        // 100 ms: it may have been queued behind a wait released just now), then sees the abort flag within
        // microseconds (its output is then not valid).
        const uint64_t ll_until = std::max<uint64_t>(until, now_ns() + 100000000ull);
        // The last call whose kernel runs: a later number given up on the host never writes kLlDone.
        while (ll_launched_seq_ != 0 && uint32_t(ll_control_[kLlDone]) != ll_launched_seq_ && now_ns() < ll_until &&
               wait_ms > 0) {
            std::this_thread::sleep_for(std::chrono::microseconds(100));
        }
        ll_control_[kLlAbort] = 1;
    }
    return released;
}

int CudaIpcP2p::release_flag_waits(int64_t wait_ms) {
    if (flags_ == nullptr || flags_host_ == nullptr) return 0;
    std::lock_guard<std::mutex> lock(flags_mutex_);
    DeviceScope scope(device_);
    if (!private_streams()) {
        stream_blocked_ = true; // cannot check: assume the worst rather than hang in cudaFree
        VCCL_WARN(kLogDevice, "rank %d: no stream to check pending device transfers at destroy; flags left allocated",
                  rank_);
        return -1;
    }
    // DONE and FULL waits are released at once on abort (wait_ms 0): releasing only lets this rank's own
    // stream go on. Releasing a READY or FREE wait lets this rank's copy land in the peer's memory before the
    // peer said it may, so the peer gets a grace period even on abort.
    const uint64_t start = now_ns();
    const uint64_t done_until = start + uint64_t(wait_ms) * 1000000ull;
    const uint64_t ready_until = start + uint64_t(wait_ms > kReadyGraceMs ? wait_ms : kReadyGraceMs) * 1000000ull;
    std::vector<std::pair<Region, int>> left;
    for (;;) {
        const uint32_t* flags = read_flags(now_ns() + 1000000000ull);
        if (flags == nullptr) { // an error, or the reads are stuck: check nothing more, release everything
            left.clear();
            for (int p = 0; p < nranks_; ++p) left.insert(left.end(), {{kReady, p}, {kDone, p}, {kFull, p}, {kFree, p}});
            break;
        }
        left = unsatisfied(flags);
        uint64_t now = now_ns();
        bool ready_left = false, done_left = false;
        for (const auto& f : left) (lets_copy_go(f.first) ? ready_left : done_left) = true;
        if ((!ready_left || now >= ready_until) && (!done_left || now >= done_until)) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    if (left.empty()) return 0;
    int written = 0;
    for (cudaStream_t st : private_streams_) { // the same writes on every stream: one of them is not stuck
        if (st == nullptr) continue;
        for (const auto& f : left) {
            if (driver().write_value(static_cast<CUstream>(st), flag_addr(rank_, f.first, f.second),
                                     expected(f.first, f.second), CU_STREAM_WRITE_VALUE_DEFAULT) == CUDA_SUCCESS) {
                ++written;
            }
        }
    }
    const uint32_t* after = read_flags(now_ns() + 1000000000ull);
    bool landed = after != nullptr && unsatisfied(after).empty();
    stream_blocked_ = !landed;
    VCCL_WARN(kLogDevice, "rank %d: %zu wait(s) of direct device transfers were still pending at %s; %s (the data of "
              "those transfers is not valid; a released send may still land in the peer's buffer)", rank_, left.size(),
              wait_ms > 0 ? "destroy" : "abort",
              landed ? "released them" : "could not release them within 1 s: flags and mappings stay allocated");
    return written;
}

uint32_t CudaIpcP2p::expected(Region region, int peer) const {
    switch (region) {
    case kReady: return ready_waited_[peer];
    case kDone: return done_waited_[peer];
    case kFull: return fifo_full_waited_[peer];
    case kFree: return fifo_credit_waited_[peer];
    default: return 0;
    }
}

std::vector<std::pair<CudaIpcP2p::Region, int>> CudaIpcP2p::unsatisfied(const uint32_t* flags) const {
    std::vector<std::pair<Region, int>> out;
    for (int p = 0; p < nranks_; ++p) {
        for (Region region : {kReady, kDone, kFull, kFree}) {
            // The waits compare cyclically (CU_STREAM_WAIT_VALUE_GEQ): so does this.
            uint32_t have = flags[size_t(region) * size_t(nranks_) + size_t(p)];
            if (int32_t(have - expected(region, p)) < 0) out.emplace_back(region, p);
        }
    }
    return out;
}

} // namespace vccl

#endif
