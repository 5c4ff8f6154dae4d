/* SPDX-License-Identifier: BSD-3-Clause */
#include "tools/perf/gemm_window.h"

#include <algorithm>

namespace vperf {

GemmWindow gemm_window(const std::vector<double>& begin, const std::vector<double>& end, double t0, double t1,
                       double t2) {
    GemmWindow w;
    const size_t n = std::min(begin.size(), end.size());
    for (size_t i = 0; i < n; ++i) {
        const double b = begin[i], e = end[i];
        if (e > b) {
            double overlap = std::min(e, t1) - std::max(b, t0);
            if (overlap > 0) w.work += overlap / (e - b);
            overlap = std::min(e, t2) - std::max(b, t0);
            if (overlap > 0) w.work_to_t2 += overlap / (e - b);
        }
        if (i + 1 < n) {
            const double gap = std::min(begin[i + 1], t1) - std::max(e, t0);
            if (gap > 0) w.idle_ms += gap;
        }
    }
    return w;
}

} // namespace vperf
