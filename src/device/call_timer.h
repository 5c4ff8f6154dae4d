/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Device time of collectives that run on the GPUs (kernels or copy engines), for telemetry's collective time
 * counters: one call in kSample is timed by a pair of timing events around its work on the caller's stream, and
 * read once its end has run (a later call looks; nothing ever waits for it). The sampled time stands for kSample
 * calls. Per kind of collective, calls kPhase, kPhase + kSample, ... are timed: not the first ones, whose time
 * includes loading their kernels (CUDA loads modules lazily: 49 ms for a first AllGather on the H200), which
 * would stand for kSample calls. Two event records per kSample calls keep the cost off small collectives (an event record is about a
 * microsecond of host time). Under the communicator's operation lock.
 */
#ifndef VCCL_DEVICE_CALL_TIMER_H_
#define VCCL_DEVICE_CALL_TIMER_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "vccl.h"

namespace vccl {

class CallTimer {
public:
    static constexpr uint32_t kSample = 64;
    static constexpr uint32_t kPhase = 8;
    static constexpr size_t kKinds = 16; // telemetry's collective kinds (TransferTag::coll)

    CallTimer() = default;
    ~CallTimer() { release(); }
    CallTimer(const CallTimer&) = delete;
    CallTimer& operator=(const CallTimer&) = delete;

    /* Before the work of a call of `kind` on `stream` of GPU `device` (the communicator's; the caller's current one
     * may be another): true when this call is timed (its start is recorded). */
    bool begin(vcclStream_t stream, uint8_t kind, int device);
    /* After a timed call's work was enqueued on `stream` (`ok`: it was; else the pair is dropped). */
    void end(vcclStream_t stream, bool ok);
    /* Whether no timed call waits to be read (poll makes no CUDA call then). */
    bool idle() const { return pending_.empty(); }
    /* Hands every timed call whose end has run to fn(kind, nanoseconds of kSample calls). */
    void poll(const std::function<void(uint8_t, uint64_t)>& fn);
    /* Destroys the events without waiting for the device. */
    void release();

private:
    static constexpr size_t kMaxPending = 8; // beyond, calls are not timed until some have run
    struct Pair {
        void* start = nullptr; // cudaEvent_t
        void* stop = nullptr;
        uint8_t kind = 0;
    };
    uint64_t calls_[kKinds] = {};
    std::vector<Pair> pending_, free_;
    Pair current_;
    int device_ = -1; // of the events (made on the communicator's GPU)
    bool timing_ = false;
};

} // namespace vccl

#endif
