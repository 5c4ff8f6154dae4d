/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Background progress of a communicator's transport while no operation runs.
 *
 * The failover protocol needs both ranks of a pair to keep talking after an operation has ended on one of
 * them: the acknowledgement that completes the peer's send, or the RESUME exchange after a path switch, may be
 * lost with the path and must be answered again. A rank that finished its part and then waits elsewhere
 * (MPI_Barrier, another communicator, computation) would leave its peer stalled until its next vccl call, and
 * forever if that call waits for the peer (found by fault-alternate: rank 1 in MPI_Allreduce, rank 0's send
 * never acknowledged). Plain UCX needs it too: a completed receive may still owe the sender the
 * acknowledgement of a rendezvous or synchronous send (ucx_transport.cc). NCCL avoids this with its proxy
 * thread; vccl drives the transport from a thread that runs only while the communicator's operation lock is
 * free and no staged job runs, so transport calls stay serialised.
 */
#ifndef VCCL_COMM_IDLE_PROGRESS_H_
#define VCCL_COMM_IDLE_PROGRESS_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>

#include "transport/transport.h"

namespace vccl {

class IdleProgress {
public:
    /* Every interval_ms, when op_mutex is free and no operation started since the previous poll (operations
     * drive the transport themselves), calls transport->progress() under it. After kQuietNs with
     * no operation (*activity unchanged, the lock never found taken) and nothing pending in the transport,
     * the interval doubles up to kMaxIntervalMs; any of those brings it back at once. A peer that needs this
     * rank after such a quiet time is in a fault (a lost acknowledgement, a path switch) and waits at most
     * kMaxIntervalMs more, against failover timeouts of hundreds of milliseconds. While *staged_jobs is not
     * zero the staged queue's proxy drives the transport (transport/staging/staged_queue.h), and this thread keeps off.
     * `also`, when set, runs with each poll (the device path's telemetry, telemetry/device_flows.h). */
    IdleProgress(std::mutex* op_mutex, Transport* transport, int interval_ms, const std::atomic<uint64_t>* activity,
                 const std::atomic<int>* staged_jobs = nullptr, std::function<bool()> also = nullptr);
    static constexpr int kMaxIntervalMs = 20;
    static constexpr int64_t kQuietNs = 1000000000; // 1 s
    ~IdleProgress(); // stops and joins the thread
    /* The wait before the next poll, in ms (for tests: the back-off is checked by state, not by counting
     * polls, which a crowded machine makes unreliable). */
    int interval_ms_now() const { return interval_now_.load(std::memory_order_relaxed); }
    IdleProgress(const IdleProgress&) = delete;
    IdleProgress& operator=(const IdleProgress&) = delete;

private:
    void run();

    std::mutex* op_mutex_;
    Transport* transport_;
    int interval_ms_;
    const std::atomic<uint64_t>* activity_; // operations started on the communicator
    const std::atomic<int>* staged_jobs_;    // may be NULL
    std::function<bool()> also_;             // polled with the transport (may be empty); true: work still pending
    std::mutex wake_mutex_;
    std::condition_variable wake_;
    bool stop_ = false;
    std::atomic<int> interval_now_;
    std::thread thread_;
};

} // namespace vccl

#endif
