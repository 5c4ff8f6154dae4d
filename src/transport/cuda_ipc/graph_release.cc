/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The thread that lets captured send/recv replays of an aborted or revoked communicator go on
 * (transport/cuda_ipc/graph_release.h).
 */
#include "transport/cuda_ipc/graph_release.h"

#if VCCL_HAVE_CUDA

#include <cuda_runtime_api.h>

#include <chrono>
#include <thread>

#include "core/clock.h"
#include "core/log.h"
#include "device/memory.h"
#include "device/stream_order.h"

namespace vccl {

namespace {

// Every byte of a word 1: 0x01010101, which passes the waits (CU_STREAM_WAIT_VALUE_GEQ 1, compared cyclically).
constexpr int kReleasedByte = 1;
constexpr auto kRound = std::chrono::milliseconds(1);
constexpr uint64_t kStuckNs = 20000000; // a round not done after 20 ms: the next goes on another stream

cudaStream_t as_stream(void* s) { return static_cast<cudaStream_t>(s); }

} // namespace

std::shared_ptr<GraphWaitRelease> GraphWaitRelease::prepare(int device, int rank, uint32_t* words, size_t ready_words,
                                                            size_t done_words, int64_t grace_ms) {
    RelaxedCapture relaxed; // made while the application captures
    auto r = std::make_shared<GraphWaitRelease>(device, rank, words, ready_words, done_words, grace_ms);
    r->self_ = r;
    for (int s = 0; s < kStreams; ++s) {
        cudaStream_t st = nullptr;
        if (cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking) != cudaSuccess) {
            VCCL_WARN(kLogDevice, "rank %d: cannot set up the release of captured send/recv waits (%s): after abort "
                      "or revoke, a replay of this communicator's graphs on one rank alone waits for its peers", rank,
                      cudaGetErrorString(cudaGetLastError()));
            return nullptr; // what was made goes with r
        }
        r->streams_[s] = st;
    }
    return r;
}

GraphWaitRelease::~GraphWaitRelease() {
    for (void* s : streams_) {
        if (s != nullptr) cudaStreamDestroy(as_stream(s)); // returns at once; freed when its work is done
    }
    cudaGetLastError();
}

void GraphWaitRelease::start() {
    if (started_.exchange(true)) return;
    std::shared_ptr<GraphWaitRelease> self = self_.lock();
    if (self == nullptr) return;
    std::thread([self] { self->run(self); }).detach();
    VCCL_WARN(kLogDevice, "rank %d: CUDA graphs hold captured send/recv of an aborted or revoked communicator: their "
              "replays no longer wait for the peers (the data of those transfers is not valid)", rank_);
}

void GraphWaitRelease::stop() {
    std::lock_guard<std::mutex> lock(enqueue_mutex_);
    stopping_.store(true);
}

void GraphWaitRelease::run(std::shared_ptr<GraphWaitRelease> self) {
    relax_capture_for_this_thread(); // an application's capture elsewhere stays valid
    bool ok = cudaSetDevice(device_) == cudaSuccess;
    const uint64_t start = now_ns();
    int next = 0;
    // Each round inside an exit-guarded stretch: once the process exits, no CUDA call any more.
    while (ok && !stopping_.load() && begin_exit_guarded_work()) {
        ok = round(start, &next);
        end_exit_guarded_work();
        std::this_thread::sleep_for(kRound);
    }
    cudaGetLastError();
    self.reset(); // the last reference may be this one: freed on this thread
}

bool GraphWaitRelease::round(uint64_t start, int* next) {
    int s = -1;
    for (int k = 0; k < kStreams && s < 0; ++k) {
        cudaError_t q = cudaStreamQuery(as_stream(streams_[(*next + k) % kStreams]));
        if (q == cudaSuccess) s = (*next + k) % kStreams;
        else if (q != cudaErrorNotReady) return false; // the process is going: CUDA is shutting down
    }
    if (s < 0) return true; // every stream still stuck: the next round looks again
    const bool with_ready = now_ns() - start >= uint64_t(grace_ms_) * 1000000ull;
    const size_t first = with_ready ? 0 : ready_words_, count = ready_words_ + done_words_ - first;
    {
        std::lock_guard<std::mutex> lock(enqueue_mutex_);
        if (stopping_.load()) return false;
        if (cudaMemsetAsync(words_ + first, kReleasedByte, count * sizeof(uint32_t), as_stream(streams_[s])) !=
            cudaSuccess) {
            return false;
        }
    }
    const uint64_t enqueued = now_ns();
    cudaError_t q = cudaErrorNotReady;
    while ((q = cudaStreamQuery(as_stream(streams_[s]))) == cudaErrorNotReady && now_ns() - enqueued < kStuckNs) {
        std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    if (q == cudaErrorNotReady) *next = s + 1; // stuck behind a blocked stream: the next round goes elsewhere
    return q == cudaSuccess || q == cudaErrorNotReady;
}

} // namespace vccl

#endif
