/* SPDX-License-Identifier: BSD-3-Clause */
/* The verdict on a pairwise bandwidth matrix. Only relative judgements: a link is slow when it is far
 * below the median of this job's links, so the same rule works for shared memory, TCP and InfiniBand. */
#include <algorithm>
#include <cinttypes>
#include <cstdio>

#include "tools/diag/diag.h"

namespace vdiag {

namespace {

double median_of(std::vector<double> v) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    size_t n = v.size();
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

bool measured(const std::vector<std::vector<double>>& bw, int s, int d) {
    return s != d && d < int(bw[size_t(s)].size()) && bw[size_t(s)][size_t(d)] >= 0;
}

std::string gbps(double bw) {
    char buf[32];
    snprintf(buf, sizeof(buf), "%.3f", bw / 1e9);
    return buf;
}

} // namespace

MatrixVerdict analyze_matrix(const std::vector<std::vector<double>>& bw, double fraction) {
    MatrixVerdict v;
    v.nranks = int(bw.size());
    v.fraction = fraction;
    std::vector<Link> links;
    for (int s = 0; s < v.nranks; ++s)
        for (int d = 0; d < v.nranks; ++d)
            if (measured(bw, s, d)) links.push_back({s, d, bw[size_t(s)][size_t(d)]});
    if (links.empty()) return v;

    std::vector<double> values;
    for (const Link& l : links) values.push_back(l.bw);
    v.median = median_of(values);
    // Ties go to the lower (src, dst): the verdict must not depend on sort stability.
    std::stable_sort(links.begin(), links.end(), [](const Link& a, const Link& b) { return a.bw < b.bw; });
    v.slowest = links.front();
    for (const Link& l : links)
        if (l.bw < fraction * v.median) v.slow.push_back(l);

    // The slowest rank: the lowest harmonic mean over the links it sends and receives on, i.e. the rank
    // that needs longest to exchange equal amounts with every peer (alltoall-like). An arithmetic mean would
    // let one fast link hide a slow one; here one slow link costs what it costs in a job.
    for (int r = 0; r < v.nranks; ++r) {
        double seconds_per_byte = 0;
        int n = 0;
        for (const Link& l : links)
            if (l.src == r || l.dst == r) {
                seconds_per_byte += l.bw > 0 ? 1 / l.bw : 1e30;
                ++n;
            }
        if (n == 0) continue;
        double mean = n / seconds_per_byte;
        if (v.slowest_rank < 0 || mean < v.slowest_rank_bw) {
            v.slowest_rank = r;
            v.slowest_rank_bw = mean;
        }
    }

    // A rank common to all slow links explains them. It must be the only such rank: a single slow link, or
    // the two directions of one pair, have two candidates and name no one.
    if (v.slow.size() >= 2) {
        int common = 0;
        for (int r = 0; r < v.nranks; ++r) {
            bool all = true;
            for (const Link& l : v.slow) all = all && (l.src == r || l.dst == r);
            if (all) {
                ++common;
                v.suspect_rank = r;
            }
        }
        if (common != 1) v.suspect_rank = -1;
    }
    return v;
}

void matrix_section(const std::vector<std::vector<double>>& bw, const MatrixVerdict& v, size_t bytes, int iters,
                    bool device, Section* out) {
    out->name = "sweep";
    int n = v.nranks;
    std::string t;
    char line[256];
    snprintf(line, sizeof(line), "sweep: %d ranks, %zu bytes x %d iterations per link, %s memory; GB/s (row sends "
             "to column)\n", n, bytes, iters, device ? "device" : "host");
    t += line;
    t += "  src\\dst";
    for (int d = 0; d < n; ++d) {
        snprintf(line, sizeof(line), " %9d", d);
        t += line;
    }
    t += "\n";
    for (int s = 0; s < n; ++s) {
        snprintf(line, sizeof(line), "  %7d", s);
        t += line;
        for (int d = 0; d < n; ++d) {
            if (measured(bw, s, d)) snprintf(line, sizeof(line), " %9s", gbps(bw[size_t(s)][size_t(d)]).c_str());
            else snprintf(line, sizeof(line), " %9s", "-");
            t += line;
        }
        t += "\n";
    }
    if (v.slowest.src >= 0) {
        snprintf(line, sizeof(line), "median %s GB/s; slowest link %d -> %d at %s GB/s; slowest rank %d (harmonic mean %s GB/s)\n",
                 gbps(v.median).c_str(), v.slowest.src, v.slowest.dst, gbps(v.slowest.bw).c_str(), v.slowest_rank,
                 gbps(v.slowest_rank_bw).c_str());
        t += line;
    } else {
        t += "no links measured (one rank)\n";
    }

    for (const Link& l : v.slow) {
        snprintf(line, sizeof(line), "slow link %d -> %d: %s GB/s, below %.2f x median (%s GB/s)", l.src, l.dst,
                 gbps(l.bw).c_str(), v.fraction, gbps(v.median).c_str());
        out->findings.push_back(line);
    }
    if (v.suspect_rank >= 0) {
        snprintf(line, sizeof(line), "rank %d touches every slow link: suspect its NIC, link or host", v.suspect_rank);
        out->findings.push_back(line);
    }
    out->text = t;

    std::string j = "{\"nranks\":" + std::to_string(n) + ",\"bytes\":" + std::to_string(bytes) +
                    ",\"iters\":" + std::to_string(iters) + ",\"memory\":\"" + (device ? "device" : "host") +
                    "\",\"unit\":\"bytes/s\",\"matrix\":[";
    for (int s = 0; s < n; ++s) {
        j += s ? ",[" : "[";
        for (int d = 0; d < n; ++d) {
            if (d) j += ",";
            if (measured(bw, s, d)) {
                snprintf(line, sizeof(line), "%.0f", bw[size_t(s)][size_t(d)]);
                j += line;
            } else {
                j += "null";
            }
        }
        j += "]";
    }
    snprintf(line, sizeof(line), "],\"median\":%.0f,\"fraction\":%g", v.median, v.fraction);
    j += line;
    if (v.slowest.src >= 0) {
        snprintf(line, sizeof(line), ",\"slowest_link\":{\"src\":%d,\"dst\":%d,\"bw\":%.0f},\"slowest_rank\":{\"rank\":%d,"
                 "\"mean_bw\":%.0f}", v.slowest.src, v.slowest.dst, v.slowest.bw, v.slowest_rank, v.slowest_rank_bw);
        j += line;
    } else {
        j += ",\"slowest_link\":null,\"slowest_rank\":null";
    }
    j += ",\"slow_links\":[";
    for (size_t i = 0; i < v.slow.size(); ++i) {
        snprintf(line, sizeof(line), "%s{\"src\":%d,\"dst\":%d,\"bw\":%.0f}", i ? "," : "", v.slow[i].src,
                 v.slow[i].dst, v.slow[i].bw);
        j += line;
    }
    j += "],\"suspect_rank\":" + (v.suspect_rank >= 0 ? std::to_string(v.suspect_rank) : std::string("null")) + "}";
    out->json = j;
}

} // namespace vdiag
