/* SPDX-License-Identifier: BSD-3-Clause */
/* vccl-perf --concurrent-gemm's window arithmetic (src/tools/perf/gemm_window.cc): the GEMM work, the work up to
 * the tail's end and the idle time inside a transfer's window, from the GEMMs' event times. Hand-worked
 * timelines, then random ones against a reference that integrates the same quantities on a fine time grid. */
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "tools/perf/gemm_window.h"

namespace {

using vperf::gemm_window;
using vperf::GemmWindow;

TEST(PerfGemmWindow, BackToBackGemmsCountTheFractionInsideTheWindow) {
    std::vector<double> b, e;
    for (int i = 0; i < 10; ++i) {
        b.push_back(i);
        e.push_back(i + 1);
    }
    GemmWindow w = gemm_window(b, e, 2.5, 6.5, 10.0);
    EXPECT_NEAR(w.work, 4.0, 1e-12); // half of GEMM 2, GEMMs 3-5, half of GEMM 6
    EXPECT_NEAR(w.work_to_t2, 7.5, 1e-12);
    EXPECT_NEAR(w.idle_ms, 0.0, 1e-12);
}

TEST(PerfGemmWindow, GapsInsideTheWindowAreIdle) {
    GemmWindow w = gemm_window({0, 1.5, 3}, {1, 2.5, 4}, 0.5, 3.5, 3.5);
    EXPECT_NEAR(w.work, 2.0, 1e-12);
    EXPECT_NEAR(w.idle_ms, 1.0, 1e-12);
    EXPECT_NEAR(w.work_to_t2, w.work, 1e-12); // no tail
}

TEST(PerfGemmWindow, GapsAreClippedToTheWindow) {
    GemmWindow w = gemm_window({0, 3}, {1, 4}, 2, 5, 5);
    EXPECT_NEAR(w.idle_ms, 1.0, 1e-12); // only [2, 3] of the gap [1, 3]
    EXPECT_NEAR(w.work, 1.0, 1e-12);
}

TEST(PerfGemmWindow, AWindowInsideOneGemm) {
    GemmWindow w = gemm_window({0}, {10}, 2, 4, 6);
    EXPECT_NEAR(w.work, 0.2, 1e-12);
    EXPECT_NEAR(w.work_to_t2, 0.4, 1e-12);
}

TEST(PerfGemmWindow, EmptyAndZeroLengthGemmsCountNothing) {
    GemmWindow w = gemm_window({}, {}, 0, 1, 2);
    EXPECT_EQ(w.work, 0.0);
    EXPECT_EQ(w.idle_ms, 0.0);
    w = gemm_window({1, 1}, {1, 3}, 0, 4, 4);
    EXPECT_TRUE(std::isfinite(w.work));
    EXPECT_NEAR(w.work, 1.0, 1e-12);
}

/* Random timelines (gaps, GEMMs of different lengths, windows starting before or after the first GEMM) against a
 * grid integration: each step's midpoint is inside a GEMM (adding step / its length to the work) or in a gap
 * between two GEMMs (adding step to the idle time). */
TEST(PerfGemmWindow, MatchesAGridIntegration) {
    std::mt19937 rng(20261128);
    std::uniform_real_distribution<double> len(0.2, 2.0), gap(0.0, 1.0), unit(0.0, 1.0);
    for (int trial = 0; trial < 200; ++trial) {
        std::vector<double> b, e;
        double t = unit(rng);
        const int n = 1 + int(unit(rng) * 12);
        for (int i = 0; i < n; ++i) {
            if (unit(rng) < 0.5) t += gap(rng);
            b.push_back(t);
            t += len(rng);
            e.push_back(t);
        }
        const double span = t + 1;
        double t0 = unit(rng) * span * 0.5, t1 = t0 + unit(rng) * span * 0.5, t2 = t1 + unit(rng) * span * 0.3;
        const double step = 1e-4;
        double work = 0, work_to_t2 = 0, idle = 0;
        for (double x = t0 + step / 2; x < t2; x += step) {
            for (int i = 0; i < n; ++i) {
                if (x >= b[size_t(i)] && x < e[size_t(i)]) {
                    if (x < t1) work += step / (e[size_t(i)] - b[size_t(i)]);
                    work_to_t2 += step / (e[size_t(i)] - b[size_t(i)]);
                }
                if (i + 1 < n && x < t1 && x >= e[size_t(i)] && x < b[size_t(i) + 1]) idle += step;
            }
        }
        GemmWindow w = gemm_window(b, e, t0, t1, t2);
        const double tol = 2e-3 * (1 + n);
        EXPECT_NEAR(w.work, work, tol) << "trial " << trial;
        EXPECT_NEAR(w.work_to_t2, work_to_t2, tol) << "trial " << trial;
        EXPECT_NEAR(w.idle_ms, idle, tol) << "trial " << trial;
    }
}

} // namespace
