/* SPDX-License-Identifier: BSD-3-Clause */
/* IdleProgress (comm/idle_progress.h): progresses the transport while the operation lock is free, never
 * while an operation holds it, and stops promptly. The fault tests cover what it is for (tests/fault:
 * fault-alternate hung when a rank waited in MPI_Allreduce while its peer needed an answer). */
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>

#include "comm/idle_progress.h"

using namespace vccl;

namespace {

class CountingTransport final : public Transport {
public:
    const char* name() const override { return "counting"; }
    vcclResult_t isend(int, uint64_t, const void*, size_t, MemType, bool, TransportRequest**) override {
        return vcclInternalError;
    }
    vcclResult_t irecv(int, uint64_t, void*, size_t, MemType, TransportRequest**) override { return vcclInternalError; }
    vcclResult_t test(TransportRequest*) override { return vcclInternalError; }
    void progress() override {
        if (in_operation.load()) during_operation++;
        calls++;
    }
    bool has_pending() const override { return pending.load(); }
    void release(TransportRequest*) override {}
    vcclResult_t close(Deadline) override { return vcclSuccess; }

    std::atomic<bool> in_operation{false}; // set by the test while it holds the operation lock
    std::atomic<bool> pending{false};      // what has_pending() reports
    std::atomic<int> calls{0};
    std::atomic<int> during_operation{0};
};

/* Polls `done` every millisecond until it holds (true) or timeout_ms pass (false). */
template <typename Pred>
bool wait_until(Pred done, int timeout_ms) {
    auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    while (!done()) {
        if (std::chrono::steady_clock::now() > end) return false;
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return true;
}

bool wait_for_calls(const CountingTransport& t, int n, int timeout_ms) {
    return wait_until([&] { return t.calls.load() >= n; }, timeout_ms);
}

} // namespace

TEST(IdleProgress, ProgressesWhileIdleUnderTheLock) {
    std::mutex op_mutex;
    CountingTransport t;
    IdleProgress idle(&op_mutex, &t, 1, nullptr);
    EXPECT_TRUE(wait_for_calls(t, 5, 5000)) << "only " << t.calls.load() << " progress calls in 5 s";
    // Each call holds the lock: an operation that takes it meanwhile waits for the call to end.
    for (int i = 0; i < 20; ++i) {
        std::lock_guard<std::mutex> op(op_mutex);
        t.in_operation = true;
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
        t.in_operation = false;
    }
    EXPECT_EQ(t.during_operation.load(), 0) << "progress ran while an operation held the lock";
}

TEST(IdleProgress, NeverProgressesWhileAnOperationHoldsTheLock) {
    std::mutex op_mutex;
    CountingTransport t;
    IdleProgress idle(&op_mutex, &t, 1, nullptr);
    ASSERT_TRUE(wait_for_calls(t, 1, 5000));
    int before;
    {
        std::lock_guard<std::mutex> op(op_mutex);
        t.in_operation = true;
        before = t.calls.load();
        std::this_thread::sleep_for(std::chrono::milliseconds(50)); // ~50 intervals
        EXPECT_EQ(t.calls.load(), before);
        t.in_operation = false;
    }
    EXPECT_TRUE(wait_for_calls(t, before + 3, 5000)) << "progress did not resume after the operation";
}

TEST(IdleProgress, StopsPromptlyAndNeverAfterDestruction) {
    std::mutex op_mutex;
    CountingTransport t;
    auto start = std::chrono::steady_clock::now();
    {
        IdleProgress idle(&op_mutex, &t, 60000, nullptr); // one interval is a minute: destruction must not wait for it
    }
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    EXPECT_LT(ms, 5000.0);
    int after = t.calls.load();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    EXPECT_EQ(t.calls.load(), after);
}

/* Progress calls during about `ms` milliseconds, and the milliseconds that really passed. */
struct Calls {
    int n;
    double ms;
};
Calls calls_during(const CountingTransport& t, int ms) {
    auto start = std::chrono::steady_clock::now();
    int before = t.calls.load();
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    int n = t.calls.load() - before;
    return {n, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count()};
}

/* Waits (bounded) until the thread's next wait is `want` ms. */
bool wait_for_interval(const IdleProgress& idle, int want, int timeout_ms) {
    return wait_until([&] { return idle.interval_ms_now() == want; }, timeout_ms);
}

/* Quiet for over a second (no operation, nothing pending): the interval backs off to kMaxIntervalMs; an
 * operation or pending transport work brings 1 ms back at once. The state is read from the thread
 * (interval_ms_now) with generous deadlines; the poll counts are checked against the time that really
 * passed, with wide margins, since a crowded 2-core machine (or TSan) stretches every short sleep. */
TEST(IdleProgress, BacksOffWhenQuietAndReturnsOnActivity) {
    constexpr int kSlow = IdleProgress::kMaxIntervalMs;
    std::mutex op_mutex;
    CountingTransport t;
    std::atomic<uint64_t> activity{0};
    IdleProgress idle(&op_mutex, &t, 1, &activity);
    EXPECT_EQ(idle.interval_ms_now(), 1);
    ASSERT_TRUE(wait_for_interval(idle, kSlow, 15000)) << "no back-off after a quiet second: "
                                                       << idle.interval_ms_now() << " ms";
    Calls quiet = calls_during(t, 500);
    EXPECT_LE(quiet.n, quiet.ms / kSlow * 1.25 + 3) << "polled faster than every " << kSlow << " ms";
    EXPECT_EQ(idle.interval_ms_now(), kSlow) << "the interval moved while nothing happened";
    activity++;
    ASSERT_TRUE(wait_for_interval(idle, 1, 5000)) << "an operation did not bring the short interval back";
    t.pending = true; // e.g. an unacknowledged message: stays fast however long nothing else happens
    // Past the quiet second, sampled every 10 ms: never backs off while the transport has work in flight.
    auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(1500);
    while (std::chrono::steady_clock::now() < end) {
        ASSERT_EQ(idle.interval_ms_now(), 1) << "backed off while the transport had work in flight";
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    Calls fast = calls_during(t, 300);
    EXPECT_GT(fast.n, fast.ms / kSlow * 2) << "with a 1 ms interval, fewer polls than at half the slow pace";
}
