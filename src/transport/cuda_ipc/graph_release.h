/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * After vcclCommAbort or vcclCommRevoke, a replay of a graph that captured send/recv would wait for ever on a peer
 * that will not replay: a stream memory wait has no abort word to look at. GraphWaitRelease keeps setting this rank's
 * graph words (transport/cuda_ipc/ipc_p2p.h) from a thread of its own, about every millisecond, for as long as a
 * graph holds them: a replay's waits then pass within milliseconds (its data is not valid). The GDONE words (a
 * receive's wait) are set at once; the GREADY words (a send's wait, whose release lets the copy land in the peer's
 * buffer before the peer asked for it) after the same grace period an eager READY gets. Each round is one
 * cudaMemsetAsync on a stream of its own: a copy from or to host memory would wait behind a cudaFreeHost or cudaFree
 * of another thread, which holds the driver's lock while it waits for the device, and so for the replay. Prepared
 * (the streams) when the first send/recv is captured, started at abort or revoke.
 */
#ifndef VCCL_TRANSPORT_CUDA_IPC_GRAPH_RELEASE_H_
#define VCCL_TRANSPORT_CUDA_IPC_GRAPH_RELEASE_H_

#include "config.h"

#if VCCL_HAVE_CUDA

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>

namespace vccl {

class GraphWaitRelease {
public:
    /* Sets up (the streams, made now: at abort, making them could wait behind the very replay to release) the
     * release of `words` (device memory of `device`): `ready_words` GREADY words, then `done_words` GDONE words.
     * `grace_ms`: how long the GREADY words are left alone once started. nullptr (logged) when CUDA refuses. */
    static std::shared_ptr<GraphWaitRelease> prepare(int device, int rank, uint32_t* words, size_t ready_words,
                                                     size_t done_words, int64_t grace_ms);
    /* Starts the thread (once). */
    void start();
    bool started() const { return started_.load(); }
    /* No write is enqueued after this returns, so the words may be freed (cudaFree waits for those enqueued). Not
     * from CUDA's callbacks: it may wait for a copy being enqueued. */
    void stop();
    /* Frees the streams; the last reference must not go in CUDA's callbacks. */
    ~GraphWaitRelease();

    GraphWaitRelease(int device, int rank, uint32_t* words, size_t ready_words, size_t done_words, int64_t grace_ms)
        : device_(device), rank_(rank), words_(words), ready_words_(ready_words), done_words_(done_words),
          grace_ms_(grace_ms) {}
    GraphWaitRelease(const GraphWaitRelease&) = delete;
    GraphWaitRelease& operator=(const GraphWaitRelease&) = delete;

private:
    static constexpr int kStreams = 4; // one may stay stuck behind a blocked stream sharing its hardware queue
    void run(std::shared_ptr<GraphWaitRelease> self);
    /* One round: the words set on a stream not stuck; false when the thread must end. */
    bool round(uint64_t start, int* next);
    const int device_, rank_;
    uint32_t* const words_;
    const size_t ready_words_, done_words_;
    const int64_t grace_ms_;
    void* streams_[kStreams] = {}; // cudaStream_t
    std::mutex enqueue_mutex_;      // held while a round's write is enqueued
    std::atomic<bool> started_{false}, stopping_{false};
    std::weak_ptr<GraphWaitRelease> self_;
};

} // namespace vccl

#endif // VCCL_HAVE_CUDA

#endif
