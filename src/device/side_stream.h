/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A communicator's second stream, for device work of one call that may run beside the call's transfers on the
 * caller's stream: the reduction kernel of one piece of a pipelined reduction while the next piece moves, a
 * local copy while the peers' copies run. Each use forks from the caller's stream (the side stream waits for
 * everything enqueued there so far), and the caller's stream waits for the side stream's marks before it uses
 * their results, so a call's work never outlives the call's end on the caller's stream (communicator order,
 * device/stream_order.h, and cudaFree at destroy rely on that). Made on first use, on the caller's stream's GPU.
 */
#ifndef VCCL_DEVICE_SIDE_STREAM_H_
#define VCCL_DEVICE_SIDE_STREAM_H_

#include "vccl.h"

namespace vccl {

class SideStream {
public:
    static constexpr int kMarks = 2;

    SideStream() = default;
    ~SideStream();
    SideStream(const SideStream&) = delete;
    SideStream& operator=(const SideStream&) = delete;

    /* The side stream waits for the work enqueued on `main` so far. The side stream has `main`'s priority:
     * one stream per priority seen, each made on first use (all again when `main` belongs to another GPU than
     * the last one). */
    vcclResult_t fork(vcclStream_t main);
    /* The side stream of the last fork(); valid after a successful one. */
    vcclStream_t stream() const { return stream_; }
    /* Records how far the side stream got in mark `slot` (0 .. kMarks - 1); a later mark of the same slot
     * replaces it, so wait for it first. */
    vcclResult_t mark(int slot);
    /* `main` waits for mark `slot`. */
    vcclResult_t wait_mark(vcclStream_t main, int slot);
    /* `main` waits for everything enqueued on the side stream (after a failure, to keep it ordered). */
    vcclResult_t join(vcclStream_t main);
    /* Destroys the stream and its events without waiting for the device (CUDA frees them once their work ran). */
    void release();

private:
    /* CUDA's stream priorities run from 0 (the default, lowest) down to a greatest priority of -5 on current
     * GPUs; a greater one, should a GPU offer it, shares the last slot. */
    static constexpr int kPrioritySlots = 8;
    static int priority_slot(int priority) {
        if (priority >= 0) return 0;
        return -priority < kPrioritySlots ? -priority : kPrioritySlots - 1;
    }
    vcclResult_t make_events();

    vcclStream_t by_priority_[kPrioritySlots] = {};
    vcclStream_t stream_ = nullptr; // one of by_priority_
    void* fork_event_ = nullptr;
    void* marks_[kMarks] = {};
    int device_ = -1;
};

} // namespace vccl

#endif
