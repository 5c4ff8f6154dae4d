/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Credit schedule of the staging FIFO (transport/cuda_ipc/ipc_p2p.h), kept apart from the CUDA calls so it can be tested
 * without a GPU. Transfers are numbered from 1 per (sender, receiver) pair; transfer n uses slot
 * (n - 1) % slots, so it may be written once the receiver freed transfer n - slots.
 *
 * Credits move in batches: the receiver publishes FREE(n) only after transfers n that are multiples of the
 * batch, and a sender waits once per batch (before its first transfer) for the FREE that covers the whole
 * batch. The batch divides the slot count, so every value a sender waits for is one the receiver writes.
 */
#ifndef VCCL_TRANSPORT_CUDA_IPC_FIFO_CREDITS_H_
#define VCCL_TRANSPORT_CUDA_IPC_FIFO_CREDITS_H_

#include <cstdint>

namespace vccl {

struct FifoCredits {
    uint64_t slots = 0;
    uint64_t batch = 1;

    /* Half the slots when that divides them (a sender keeps at least half + 1 transfers in flight), else 1. */
    static FifoCredits for_slots(uint64_t slots) {
        FifoCredits c;
        c.slots = slots;
        c.batch = slots >= 2 && slots % 2 == 0 ? slots / 2 : 1;
        return c;
    }
    /* Before writing transfer n: the FREE value to wait for, or 0 when no wait is enqueued. */
    uint64_t wait_before(uint64_t n) const {
        if ((n - 1) % batch != 0 || n + batch - 1 <= slots) return 0;
        return n + batch - 1 - slots;
    }
    /* After consuming transfer n: whether the receiver publishes FREE(n). */
    bool free_after(uint64_t n) const { return n % batch == 0; }
};

} // namespace vccl

#endif
