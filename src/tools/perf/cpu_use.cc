/* SPDX-License-Identifier: BSD-3-Clause */
/* vccl-perf --cpu (cpu_use.h). CLOCK_PROCESS_CPUTIME_ID counts every thread of the process, those that ended
 * during the interval included, to the nanosecond; CLOCK_THREAD_CPUTIME_ID the calling thread. */
#include "tools/perf/cpu_use.h"

#include <time.h>

namespace vperf {

namespace {

double clock_s(clockid_t id) {
    struct timespec ts;
    if (clock_gettime(id, &ts) != 0) return 0;
    return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}

} // namespace

void CpuMeter::start() {
    wall0_ = clock_s(CLOCK_MONOTONIC);
    process0_ = clock_s(CLOCK_PROCESS_CPUTIME_ID);
    thread0_ = clock_s(CLOCK_THREAD_CPUTIME_ID);
}

void CpuMeter::stop() {
    double thread = clock_s(CLOCK_THREAD_CPUTIME_ID) - thread0_;
    double process = clock_s(CLOCK_PROCESS_CPUTIME_ID) - process0_;
    wall_s_ += clock_s(CLOCK_MONOTONIC) - wall0_;
    process_s_ += process;
    others_s_ += process > thread ? process - thread : 0;
}

CpuUse CpuMeter::use() const {
    CpuUse u;
    if (wall_s_ > 0) {
        u.process_pct = 100.0 * process_s_ / wall_s_;
        u.others_pct = 100.0 * others_s_ / wall_s_;
    }
    return u;
}

} // namespace vperf
