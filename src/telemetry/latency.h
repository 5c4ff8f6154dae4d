/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Percentiles from a send latency histogram (format.h's buckets), the way Prometheus's histogram_quantile
 * computes them from the exported buckets: find the bucket that holds the rank, interpolate linearly inside
 * it. The library (vcclCommGetTelemetryPaths), vccl-telemetry report and serve's tests share this one rule.
 */
#ifndef VCCL_TELEMETRY_LATENCY_H_
#define VCCL_TELEMETRY_LATENCY_H_

#include <cstdint>

#include "telemetry/format.h"

namespace vccl {
namespace telemetry {

/* The q-quantile (0 < q <= 1) of the counts in buckets[kLatencyBuckets], ns; 0 for an empty histogram. A
 * rank in the last (open) bucket gives that bucket's lower bound. */
inline uint64_t latency_quantile_ns(const uint64_t* buckets, double q) {
    uint64_t total = 0;
    for (int i = 0; i < kLatencyBuckets; ++i) total += buckets[i];
    if (total == 0) return 0;
    if (q <= 0) q = 0;
    if (q > 1) q = 1;
    const double rank = q * double(total);
    uint64_t below = 0;
    for (int i = 0; i < kLatencyBuckets; ++i) {
        if (buckets[i] == 0) continue;
        if (double(below + buckets[i]) >= rank) {
            const double lo = i == 0 ? 0.0 : double(latency_bucket_upper_ns(i - 1));
            if (i == kLatencyBuckets - 1) return uint64_t(lo);
            const double hi = double(latency_bucket_upper_ns(i));
            const double inside = (rank - double(below)) / double(buckets[i]);
            return uint64_t(lo + (hi - lo) * inside);
        }
        below += buckets[i];
    }
    return 0;
}

} // namespace telemetry
} // namespace vccl

#endif
