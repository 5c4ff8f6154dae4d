/* SPDX-License-Identifier: BSD-3-Clause */
/* vccl-perf --cpu: CpuMeter against threads whose load is known. A thread that spins shows as busy, one that
 * sleeps as idle, and the split between the measuring thread and the others follows who spun. On a crowded
 * 2-core CI machine a spinning thread may get far less than a core, so the expected shares are not fixed
 * numbers: each test computes them independently (getrusage for processor time, steady_clock for wall time)
 * and the meter must agree within a few points. That still fails if the meter swapped the two shares,
 * counted only the calling thread, or divided by the wrong interval. */
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include <sys/resource.h>

#include "tools/perf/cpu_use.h"

namespace {

using Clock = std::chrono::steady_clock;

void spin_for(std::chrono::milliseconds d) {
    auto end = Clock::now() + d;
    volatile unsigned sink = 0;
    while (Clock::now() < end) sink = sink + 1;
}

/* Processor seconds of the process (RUSAGE_SELF) or of the calling thread (RUSAGE_THREAD). */
double rusage_s(int who) {
    struct rusage ru = {};
    getrusage(who, &ru);
    return double(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) + double(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
}

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

constexpr double kTolerancePct = 5.0; // clock reads at slightly different moments; getrusage's microseconds

TEST(PerfCpuMeter, NotMeasuredBeforeAnInterval) {
    vperf::CpuMeter meter;
    vperf::CpuUse u = meter.use();
    EXPECT_LT(u.process_pct, 0);
    EXPECT_LT(u.others_pct, 0);
}

TEST(PerfCpuMeter, CallingThreadSpinningIsNotCountedAsOthers) {
    vperf::CpuMeter meter;
    double cpu0 = rusage_s(RUSAGE_SELF);
    auto t0 = Clock::now();
    meter.start();
    spin_for(std::chrono::milliseconds(300));
    meter.stop();
    double wall = seconds_since(t0), cpu = rusage_s(RUSAGE_SELF) - cpu0;
    vperf::CpuUse u = meter.use();
    EXPECT_NEAR(u.process_pct, 100.0 * cpu / wall, kTolerancePct); // ~100% unless the machine is crowded
    EXPECT_GT(u.process_pct, 1.0);                                  // it counted something
    EXPECT_LT(u.others_pct, kTolerancePct);                         // no other thread did anything
    EXPECT_GE(u.others_pct, 0.0);
}

TEST(PerfCpuMeter, AnotherThreadSpinningIsCountedAsOthers) {
    vperf::CpuMeter meter;
    double worker_cpu = 0;
    auto t0 = Clock::now();
    meter.start();
    std::thread worker([&worker_cpu] {
        spin_for(std::chrono::milliseconds(300));
        worker_cpu = rusage_s(RUSAGE_THREAD);
    });
    worker.join(); // the calling thread sleeps meanwhile; the worker ends inside the interval and still counts
    meter.stop();
    double wall = seconds_since(t0);
    vperf::CpuUse u = meter.use();
    EXPECT_NEAR(u.others_pct, 100.0 * worker_cpu / wall, kTolerancePct);
    EXPECT_GT(u.others_pct, 1.0);
    EXPECT_LT(u.process_pct - u.others_pct, kTolerancePct); // the calling thread's own share
}

TEST(PerfCpuMeter, IdleIntervalsAddWallTimeOnly) {
    // A busy interval then an idle one: the use is the processor time over both walls (about half).
    vperf::CpuMeter meter;
    auto t0 = Clock::now();
    meter.start();
    spin_for(std::chrono::milliseconds(200));
    meter.stop();
    double busy_wall = seconds_since(t0);
    vperf::CpuUse busy = meter.use();
    auto t1 = Clock::now();
    meter.start();
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    meter.stop();
    double idle_wall = seconds_since(t1);
    vperf::CpuUse both = meter.use();
    EXPECT_GT(busy.process_pct, 1.0);
    // The idle interval adds wall time and (almost) no processor time.
    EXPECT_NEAR(both.process_pct / busy.process_pct, busy_wall / (busy_wall + idle_wall), 0.1);
}

} // namespace
