/* SPDX-License-Identifier: BSD-3-Clause */
/* The order of a communicator's device work across the caller's streams, and its teardown once that work has
 * run. */
#ifndef VCCL_DEVICE_STREAM_ORDER_H_
#define VCCL_DEVICE_STREAM_ORDER_H_

#include <functional>
#include <vector>

#include "vccl.h"

namespace vccl {

/* Keeps a communicator's device work in call order whatever streams the calls use, as NCCL does: its
 * operations share scratch memory and sequence numbers, so one enqueued on a stream other than the last one
 * first waits (on the device) for everything enqueued on the last one. One event record per call, about a
 * microsecond of host time; the event stays valid when the caller destroys the old stream. */
class StreamOrder {
public:
    ~StreamOrder();
    /* Before enqueuing a call's work on `streams` (its distinct streams, in order). */
    vcclResult_t before(const std::vector<vcclStream_t>& streams);
    /* After enqueuing it: the last stream waits for the others, then the call's end is recorded there. */
    vcclResult_t after(const std::vector<vcclStream_t>& streams);
    /* Calls `fn` once every call recorded so far has run on the device: now when it has (or nothing was
     * recorded), else from a thread that polls for it. For cudaFree at destroy, which would wait for the
     * whole GPU, also for a stream the caller's own work keeps blocked. `never_now`: from a thread also when
     * the calls have run, since the GPU may still be busy (or blocked) with other work (vcclCommAbort);
     * `device`: the GPU the thread works on when no call was recorded (the communicator's). */
    void run_when_done(std::function<void()> fn, bool never_now = false, int device = -1);
private:
    void* event_ = nullptr; // cudaEvent_t, made on first use
    int event_device_ = -1;
    vcclStream_t last_ = nullptr;
    bool recorded_ = false;
};

/* For vccl's threads that call CUDA for as long as something lives (not a one-off teardown): the process's exit
 * waits for a stretch of CUDA calls between begin_exit_guarded_work() and end_exit_guarded_work() (up to 2 s, as for
 * the teardown threads of run_when_done), and once it has begun, begin returns false and the thread must call CUDA
 * no more. process_exiting(): the same question without starting a stretch. */
bool begin_exit_guarded_work();
void end_exit_guarded_work();
bool process_exiting();

} // namespace vccl

#endif
