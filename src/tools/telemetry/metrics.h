/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The Prometheus text exposition (format 0.0.4) of the telemetry rings, as vccl-telemetry serve answers
 * /metrics. No HTTP here: serve.cc hands the text out, tests and the benchmark call render_metrics directly.
 * The metric names and labels are documented in vccl-telemetry(1); keep the two in step.
 */
#ifndef VCCL_TOOLS_TELEMETRY_METRICS_H_
#define VCCL_TOOLS_TELEMETRY_METRICS_H_

#include <string>
#include <vector>

#include "tools/telemetry/rings.h"

namespace vtel {

struct MetricsOptions {
    /* Per ring (rank), the peers with the most bytes keep a label each; the others of the rank are summed
     * into peer="other", so that a scrape stays bounded on large jobs (64 ranks x 64 peers x 2 paths). */
    int max_peers = 8;
    std::string job; // only rings of this job (empty: every ring of the user)
};

/* What one scrape read: the rings and the vccl-* files that could not be read. */
struct ScrapeInput {
    std::vector<RingView> rings;
    std::vector<RingProblem> problems;
    double read_seconds = 0; // time spent reading the rings
};

/* Reads every ring of dir; with a cache, through it (rings stay mapped between scrapes). */
ScrapeInput read_scrape(const std::string& dir, RingCache* cache = nullptr);

/* The exposition text; now_ns: CLOCK_MONOTONIC now (the rings' heartbeats are on that clock). */
std::string render_metrics(const ScrapeInput& in, const MetricsOptions& options, uint64_t now_ns);

/* A label value as the text format wants it: backslash, quote and newline escaped, and every byte outside
 * printable ASCII replaced by '_' (ring strings come from other processes: one invalid UTF-8 byte would make
 * Prometheus reject the whole scrape). */
std::string label_value(const std::string& s);

} // namespace vtel

#endif
