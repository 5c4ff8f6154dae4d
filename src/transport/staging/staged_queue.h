/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Asynchronous host staging of device work: the path of device buffers that the direct GPU path does not
 * serve (peers on other hosts, VCCL_P2P_DIRECT=0, collectives over ranks not all on one host). The calling
 * thread only enqueues stream work and hands the host part (the network transfer between pinned copies) to a
 * proxy thread, so it never waits for the device:
 *
 *   caller's stream: copy the inputs into pinned memory, record READY, wait DONE >= n (a host-mapped word),
 *                    copy the outputs back, record RELEASED (the pinned slot may be reused after it)
 *   proxy thread:    wait for READY (event query), run job n's host part, write DONE = n
 *
 * A job may come in parts, each with its own READY and DONE (Job, below): large operations are cut so that
 * the copies and the network overlap.
 *
 * Jobs run one at a time in submission order, so a communicator's traffic keeps its call order on every
 * rank. While a job is queued or running nothing else may drive the communicator's transport: the caller
 * runs other work only once the queue is idle (wait_idle), and pending() tells the idle-progress thread to
 * keep off. Pinned slots (powers of two) are kept for reuse; `pool_bytes` (VCCL_STAGING_POOL_BYTES) bounds the
 * data in flight (one job larger than that still runs, alone), and slots kept beyond twice it are given back
 * when a new one is made. A submission that finds the bound reached waits for earlier outputs to be copied
 * back, which needs only the proxy and the device, never the caller.
 */
#ifndef VCCL_TRANSPORT_STAGING_STAGED_QUEUE_H_
#define VCCL_TRANSPORT_STAGING_STAGED_QUEUE_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "transport/staging/staging_buffer.h"
#include "vccl.h"

namespace vccl {

class StagedQueue {
public:
    /* Between a device buffer and the job's pinned slot (offsets into the slot; transport/staging/staging_buffer.h). */
    using Copy = StagedCopy;
    /* One step of a job: its inputs, its host part, its outputs. */
    struct Part {
        std::vector<Copy> in;    // device to host, before the host part
        std::vector<Copy> out;   // host to device, after it
        std::function<vcclResult_t(char* host)> work; // the host part, on the proxy thread
    };
    /* The stream copies every part's inputs (each part's READY recorded after its own), then, part by part,
     * waits for its DONE and copies its outputs. So with several parts the host part of one overlaps the
     * input copies of the next and the output copies of the one before (a pipeline within one operation);
     * every input is still copied before any output (an in-place exchange sends the old data). */
    struct Job {
        vcclStream_t stream = nullptr;
        size_t host_bytes = 0;   // size of the pinned slot, shared by the parts
        std::vector<Part> parts; // at least one; their host parts run in order
    };
    /* Called on the proxy thread when a job's host part fails: the error and its message. The jobs after it
     * skip their host parts (their streams still go on; their outputs are not valid). */
    using FailureFn = std::function<void(vcclResult_t, const std::string&)>;

    /* A queue for GPU `device`, or nullptr (the reason logged at INFO) where stream memory operations on
     * host memory are not available (builds without CUDA, old drivers): callers then stage synchronously.
     * `aborted` ends waits and skips host parts; `pending` counts jobs queued or running. `while_waiting`
     * runs on the proxy thread about every 100 us while a job waits for its stream: the proxy owns the
     * transport then, and must keep driving it (acknowledgements and path switches of earlier operations,
     * as IdleProgress does when no job is queued), or a peer would stall while this rank's GPU is busy.
     * `test_key`: the communicator, for the test points (core/test_point.h). */
    static std::unique_ptr<StagedQueue> create(int device, uint64_t pool_bytes, const std::atomic<bool>* aborted,
                                               std::atomic<int>* pending, FailureFn on_failure,
                                               std::function<void()> while_waiting, const void* test_key);
    virtual ~StagedQueue() = default; // stop(0) unless stopped

    /* Calling thread: enqueues the job's stream work and queues its host part; returns without waiting for
     * the device (except for a free pinned slot, above). An error before the first part's stream wait for
     * DONE was enqueued queues nothing; after it, every part's host part is still queued (the stream needs
     * their DONE, the peers run them too) and the error is returned. One caller at a time. */
    virtual vcclResult_t submit(Job job) = 0;
    /* True when no job is queued or running. */
    virtual bool idle() const = 0;
    /* Waits until idle (the jobs wait for their streams' READY, so this waits for the device). */
    virtual void wait_idle() = 0;
    /* Ends the queue: lets queued jobs run for up to `wait_ms` (0: none starts), then skips the rest, writing
     * their DONE so no stream stays blocked (their outputs are not valid), and joins the proxy thread. Pinned
     * memory a stream may still read stays allocated (logged). */
    virtual void stop(int64_t wait_ms) = 0;
};

} // namespace vccl

#endif
