/* SPDX-License-Identifier: BSD-3-Clause */
/* FastClock: see fast_clock.h. */
#include "telemetry/fast_clock.h"

#include <cstdio>
#include <cstring>

namespace vccl {
namespace telemetry {

namespace {
constexpr uint64_t kFirstCalibrationNs = 5000000;   // 5 ms before the first scale
constexpr uint64_t kAnchorIntervalNs = 1000000000;  // at most a second between anchors
constexpr uint64_t kPairTicks = 4000;               // a (tsc, ns) pair read within this many ticks

#if defined(__x86_64__)
/* CLOCK_MONOTONIC and the TSC read as close together as we can: an interrupt or a VM exit between the two
 * readings would skew the scale by its length (microseconds over a millisecond). */
void read_pair(uint64_t* tsc, uint64_t* ns) {
    for (int attempt = 0;; ++attempt) {
        uint64_t t1 = __rdtsc();
        uint64_t n = vccl::now_ns();
        uint64_t t2 = __rdtsc();
        if ((t2 > t1 && t2 - t1 < kPairTicks) || attempt == 4) {
            *tsc = t1 + (t2 - t1) / 2;
            *ns = n;
            return;
        }
    }
}
#endif
} // namespace

bool tsc_is_clocksource() {
#if defined(__x86_64__)
    static const bool tsc = [] {
        FILE* f = fopen("/sys/devices/system/clocksource/clocksource0/current_clocksource", "re");
        if (f == nullptr) return false;
        char name[32] = {};
        bool ok = fgets(name, sizeof(name), f) != nullptr && strncmp(name, "tsc", 3) == 0 &&
                  (name[3] == '\n' || name[3] == '\0');
        fclose(f);
        return ok;
    }();
    return tsc;
#else
    return false;
#endif
}

uint64_t FastClock::slow_path(uint64_t tsc) {
    uint64_t ns = 0;
#if defined(__x86_64__)
    read_pair(&tsc, &ns);
#else
    ns = vccl::now_ns();
#endif
    if (calib_ns_ == 0) { // first call: start measuring
        calib_tsc_ = tsc;
        calib_ns_ = ns;
        return ns;
    }
    if (tsc <= calib_tsc_ || ns - calib_ns_ < kFirstCalibrationNs) {
        // Too early for a scale, or a reading from before the calibration point (another CPU's TSC a few
        // ticks behind): clock_gettime, kept from going backwards against the mapping in use.
        if (valid_ticks_ != 0 && tsc > anchor_tsc_ && mapped(tsc) > ns) ns = mapped(tsc);
        if (valid_ticks_ != 0 && ns < anchor_ns_) ns = anchor_ns_;
        return ns;
    }
    uint64_t old_mapped = valid_ticks_ != 0 && tsc > anchor_tsc_ ? mapped(tsc) : 0;
    scale_ = uint64_t(((unsigned __int128)(ns - calib_ns_) << 32) / (tsc - calib_tsc_));
    if (scale_ == 0) scale_ = 1;
    calib_tsc_ = tsc;
    calib_ns_ = ns;
    anchor_tsc_ = tsc;
    anchor_ns_ = ns > old_mapped ? ns : old_mapped; // never backwards
    // The first anchors come soon (a scale measured over 5 ms is good to ~1e-4 at best), then the interval
    // doubles up to a second: each new scale is measured over the whole interval before it.
    interval_ns_ = interval_ns_ == 0 ? 4 * kFirstCalibrationNs : interval_ns_ * 2;
    if (interval_ns_ > kAnchorIntervalNs) interval_ns_ = kAnchorIntervalNs;
    valid_ticks_ = uint64_t(((unsigned __int128)interval_ns_ << 32) / scale_);
    return anchor_ns_;
}

} // namespace telemetry
} // namespace vccl
