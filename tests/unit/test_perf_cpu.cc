/* vccl-perf --cpu: CpuMeter against threads whose load is known. A thread that spins shows as busy, one that
 * sleeps as idle, and the split between the measuring thread and the others follows who spun. Bounds are wide
 * (a 2-core CI machine runs other tests beside this one) but each would fail if the meter swapped the two
 * shares, counted only the calling thread, or divided by the wrong interval. */
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "tools/perf/cpu_use.h"

namespace {

using Clock = std::chrono::steady_clock;

void spin_for(std::chrono::milliseconds d) {
    auto end = Clock::now() + d;
    volatile unsigned sink = 0;
    while (Clock::now() < end) sink = sink + 1;
}

TEST(PerfCpuMeter, NotMeasuredBeforeAnInterval) {
    vperf::CpuMeter meter;
    vperf::CpuUse u = meter.use();
    EXPECT_LT(u.process_pct, 0);
    EXPECT_LT(u.others_pct, 0);
}

TEST(PerfCpuMeter, CallingThreadSpinningIsNotCountedAsOthers) {
    vperf::CpuMeter meter;
    meter.start();
    spin_for(std::chrono::milliseconds(300));
    meter.stop();
    vperf::CpuUse u = meter.use();
    EXPECT_GT(u.process_pct, 25.0); // one thread busy: ~100% unless the machine is crowded
    EXPECT_LT(u.process_pct, 115.0);
    EXPECT_LT(u.others_pct, 10.0);  // no other thread did anything
    EXPECT_GE(u.others_pct, 0.0);
}

TEST(PerfCpuMeter, AnotherThreadSpinningIsCountedAsOthers) {
    vperf::CpuMeter meter;
    meter.start();
    std::thread worker([] { spin_for(std::chrono::milliseconds(300)); });
    worker.join(); // the calling thread sleeps meanwhile; the worker ends inside the interval and still counts
    meter.stop();
    vperf::CpuUse u = meter.use();
    EXPECT_GT(u.others_pct, 25.0);
    EXPECT_LT(u.others_pct, 115.0);
    EXPECT_LT(u.process_pct - u.others_pct, 10.0); // the calling thread's own share
}

TEST(PerfCpuMeter, IdleIntervalsAddWallTimeOnly) {
    // A busy interval then an idle one of the same length: the use is the mean over both, about half.
    vperf::CpuMeter meter;
    meter.start();
    spin_for(std::chrono::milliseconds(200));
    meter.stop();
    vperf::CpuUse busy = meter.use();
    meter.start();
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    meter.stop();
    vperf::CpuUse both = meter.use();
    EXPECT_GT(busy.process_pct, 25.0);
    EXPECT_LT(both.process_pct, busy.process_pct * 0.75); // the idle interval halves it (0.5 expected)
    EXPECT_GT(both.process_pct, busy.process_pct * 0.25);
}

} // namespace
