/* SPDX-License-Identifier: BSD-3-Clause */
/* vccl-perf --concurrent-gemm: what the GEMMs' CUDA event times say about one transfer's window (gemm.cc).
 * Plain arithmetic on times, kept apart from CUDA so tests/unit/test_perf_gemm_window.cc can check it on any
 * machine. */
#ifndef VCCL_TOOLS_PERF_GEMM_WINDOW_H_
#define VCCL_TOOLS_PERF_GEMM_WINDOW_H_

#include <vector>

namespace vperf {

struct GemmWindow {
    double work = 0;         // GEMMs' worth of work done inside [t0, t1]
    double work_to_t2 = 0;   // ... inside [t0, t2]
    double idle_ms = 0;      // time inside [t0, t1] between one GEMM's end and the next one's start
};

/* GEMM i ran from begin[i] to end[i] (ms, in issue order on one stream). The transfer's window is [t0, t1]; its
 * tail runs on to t2 (>= t1). A GEMM that straddles a bound counts with the fraction inside, assuming it
 * progresses evenly. */
GemmWindow gemm_window(const std::vector<double>& begin, const std::vector<double>& end, double t0, double t1,
                       double t2);

} // namespace vperf

#endif
