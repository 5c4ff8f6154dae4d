/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The staging FIFO's credit schedule (src/transport/cuda_ipc/fifo_credits.h), checked without a GPU: a sender and a
 * receiver advance in random interleavings, the sender blocking where wait_before() says, the receiver
 * publishing FREE where free_after() says. A sender must never write a slot whose previous transfer the
 * receiver has not consumed, and the pair must never stall while transfers remain.
 */
#include <gtest/gtest.h>

#include <random>

#include "transport/cuda_ipc/fifo_credits.h"

namespace {

using vccl::FifoCredits;

struct Outcome {
    bool overwrote = false; // a slot written before its previous transfer was consumed
    bool stalled = false;   // neither side could move with transfers left
    uint64_t waits = 0, frees = 0;
};

Outcome run(uint64_t slots, uint64_t transfers, unsigned seed) {
    FifoCredits c = FifoCredits::for_slots(slots);
    std::mt19937 rng(seed);
    uint64_t sent = 0, consumed = 0, published = 0; // transfers written, read out; the last FREE value
    uint64_t waiting_for = 0;                       // the sender's enqueued wait (0: none)
    Outcome o;
    while (consumed < transfers) {
        bool sender_can = sent < transfers;
        if (sender_can && waiting_for == 0) {
            uint64_t w = c.wait_before(sent + 1);
            if (w != 0) {
                waiting_for = w;
                ++o.waits;
            }
        }
        if (waiting_for != 0 && published < waiting_for) sender_can = false;
        bool receiver_can = consumed < sent;
        if (!sender_can && !receiver_can) {
            o.stalled = true;
            return o;
        }
        if (sender_can && (!receiver_can || rng() % 2 == 0)) {
            waiting_for = 0;
            uint64_t n = ++sent;
            if (n > slots && consumed < n - slots) o.overwrote = true;
        } else {
            uint64_t n = ++consumed;
            if (c.free_after(n)) {
                published = n;
                ++o.frees;
            }
        }
    }
    return o;
}

TEST(FifoCredits, NeverOverwritesAndNeverStalls) {
    for (uint64_t slots = 1; slots <= 64; ++slots) {
        for (unsigned seed = 1; seed <= 20; ++seed) {
            Outcome o = run(slots, 1000, seed);
            ASSERT_FALSE(o.overwrote) << slots << " slots, seed " << seed;
            ASSERT_FALSE(o.stalled) << slots << " slots, seed " << seed;
        }
    }
}

TEST(FifoCredits, EveryWaitedValueIsPublished) {
    for (uint64_t slots = 1; slots <= 64; ++slots) {
        FifoCredits c = FifoCredits::for_slots(slots);
        ASSERT_EQ(slots % c.batch, 0u) << slots;
        for (uint64_t n = 1; n <= 10 * slots + 7; ++n) {
            uint64_t w = c.wait_before(n);
            if (w == 0) continue;
            EXPECT_TRUE(c.free_after(w)) << slots << " slots: transfer " << n << " waits for FREE " << w;
            EXPECT_LT(w, n) << "a transfer must only wait for earlier transfers";
            EXPECT_GE(w + slots, n + c.batch - 1) << "the wait must cover the whole batch";
        }
    }
}

TEST(FifoCredits, BatchesCutStreamOperations) {
    // 8 slots (the default): batches of 4, so one wait and one FREE per 4 transfers once the FIFO is full.
    FifoCredits c = FifoCredits::for_slots(8);
    EXPECT_EQ(c.batch, 4u);
    EXPECT_EQ(c.wait_before(1), 0u);
    EXPECT_EQ(c.wait_before(5), 0u);
    EXPECT_EQ(c.wait_before(9), 4u);
    EXPECT_EQ(c.wait_before(10), 0u);
    EXPECT_EQ(c.wait_before(13), 8u);
    Outcome o = run(8, 1000, 7);
    EXPECT_EQ(o.frees, 250u);
    EXPECT_EQ(o.waits, 248u); // transfers 9, 13, ..., 997
    // Odd slot counts fall back to a wait and a FREE per transfer.
    EXPECT_EQ(FifoCredits::for_slots(3).batch, 1u);
    EXPECT_EQ(FifoCredits::for_slots(3).wait_before(4), 1u);
}

} // namespace
