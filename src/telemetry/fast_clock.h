/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * CLOCK_MONOTONIC nanoseconds for the telemetry hot path, read from the TSC where that is safe.
 *
 * Telemetry stamps every transfer twice (post and completion). clock_gettime through the vDSO costs
 * 24-28 ns on the machines we measured, more than half of what recording a transfer costs, and small
 * messages take under a microsecond: the clock alone was a measurable share of an 8-byte allreduce. RDTSC
 * costs a few nanoseconds. We use it only where the kernel itself keeps time with the TSC
 * (current_clocksource "tsc": invariant, synchronised across CPUs, which the kernel verified), and convert
 * ticks to CLOCK_MONOTONIC nanoseconds with a scale measured against clock_gettime:
 *   - until 5 ms have passed since the first call every reading is a clock_gettime (the scale is unknown);
 *   - then ns = anchor_ns + (tsc - anchor_tsc) * scale; at the end of each anchored interval (20 ms,
 *     doubling up to a second) the scale is measured again over the whole time since the last anchor and
 *     the anchor moves to a fresh (tsc, clock_gettime) pair, read back to back (retried when something
 *     came between the readings).
 * The result tracks CLOCK_MONOTONIC within about a microsecond, so records of different ranks on a node
 * stay comparable, and never goes backwards within one object (a new anchor never lies before the old
 * mapping's value). Elsewhere (other architectures, a kvm-clock or hpet clocksource) it is clock_gettime.
 *
 * One object per writer: not thread safe, no shared state besides the once-only clocksource check.
 */
#ifndef VCCL_TELEMETRY_FAST_CLOCK_H_
#define VCCL_TELEMETRY_FAST_CLOCK_H_

#include <cstdint>

#include "core/clock.h"

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

namespace vccl {
namespace telemetry {

/* True when the kernel keeps time with the TSC (read once per process). */
bool tsc_is_clocksource();

class FastClock {
public:
    FastClock() : use_tsc_(tsc_is_clocksource()) {}

    uint64_t now_ns() {
#if defined(__x86_64__)
        if (use_tsc_) {
            uint64_t tsc = __rdtsc();
            if (tsc - anchor_tsc_ < valid_ticks_) return mapped(tsc);
            return slow_path(tsc);
        }
#endif
        return vccl::now_ns();
    }

    /* For tests: whether readings come from the TSC, and the current scale (ns per tick, times 2^32). */
    bool uses_tsc() const { return use_tsc_; }
    uint64_t scale() const { return scale_; }

private:
    /* Outside the anchored interval: the first millisecond, once a second, or a TSC reading from before the
     * anchor. Reads clock_gettime and, when enough time has passed, measures the scale and re-anchors. */
    uint64_t slow_path(uint64_t tsc);
    /* The current mapping's nanoseconds for a reading at or after the anchor. */
    uint64_t mapped(uint64_t tsc) const {
        return anchor_ns_ + uint64_t((unsigned __int128)(tsc - anchor_tsc_) * scale_ >> 32);
    }

    bool use_tsc_;
    uint64_t anchor_tsc_ = 0; // readings in [anchor_tsc_, anchor_tsc_ + valid_ticks_) use the mapping
    uint64_t anchor_ns_ = 0;
    uint64_t valid_ticks_ = 0; // 0 until the first scale is known
    uint64_t scale_ = 0;
    uint64_t calib_tsc_ = 0; // the (tsc, CLOCK_MONOTONIC) pair the next scale is measured from
    uint64_t calib_ns_ = 0;
    uint64_t interval_ns_ = 0; // length of the anchored interval: 20 ms, doubling up to 1 s
};

} // namespace telemetry
} // namespace vccl

#endif
