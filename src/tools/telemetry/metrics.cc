/* SPDX-License-Identifier: BSD-3-Clause */
/* Prometheus text of the telemetry rings (metrics.h); names and labels as vccl-telemetry(1) lists them. */
#include "tools/telemetry/metrics.h"

#include <algorithm>
#include <charconv>
#include <cinttypes>
#include <cstdarg>
#include <cstdio>
#include <map>

#include "core/clock.h"

namespace vtel {

using vccl::telemetry::CollTotalsCopy;
using vccl::telemetry::kCollKinds;
using vccl::telemetry::kLatencyBuckets;
using vccl::telemetry::kMaxPathsPerPeer;
using vccl::telemetry::kSwitchCauses;
using vccl::telemetry::PathStats;
using vccl::telemetry::PathTotalsCopy;

namespace {

const char* const kPathNames[kMaxPathsPerPeer] = {"primary", "backup", "device"};

/* What path index `path` of a ring does: primary and backup in standby mode, both "spray" when both carry
 * chunks, "device" for the transfers between GPUs of one host. */
const char* path_role(const RingView& v, int path) {
    return path == vccl::telemetry::kDevicePath ? "device" : v.spray ? "spray" : kPathNames[path];
}

/* One exported path: a path of one peer, or the sum of one path index over the peers folded into "other". */
struct Row {
    std::string labels; // vccl_job="..",comm="..",rank="..",peer="..",path=".."
    PathStats stats;    // summed for an aggregate
    PathTotalsCopy totals;
    bool aggregate = false;
};

struct Out {
    std::string text;
    void add(const char* fmt, ...) __attribute__((format(printf, 2, 3))) {
        char buf[1024];
        va_list ap, again;
        va_start(ap, fmt);
        va_copy(again, ap);
        int n = vsnprintf(buf, sizeof(buf), fmt, ap);
        va_end(ap);
        if (n > 0 && size_t(n) < sizeof(buf)) {
            text.append(buf, size_t(n));
        } else if (n > 0) { // a long line (long label values): never cut one short
            std::string big(size_t(n) + 1, '\0');
            vsnprintf(&big[0], big.size(), fmt, again);
            text.append(big.data(), size_t(n));
        }
        va_end(again);
    }
    /* name{labels[,extra]} value: the lines a scrape has thousands of, without a format string to parse. */
    void sample(const char* name, const std::string& labels, const char* extra, uint64_t v) {
        head(name, labels, extra);
        char buf[24];
        auto r = std::to_chars(buf, buf + sizeof(buf), v);
        text.append(buf, size_t(r.ptr - buf));
        text += '\n';
    }
    void sample(const char* name, const std::string& labels, const char* extra, double v) {
        head(name, labels, extra);
        char buf[32];
        auto r = std::to_chars(buf, buf + sizeof(buf), v); // shortest form that reads back exactly
        text.append(buf, size_t(r.ptr - buf));
        text += '\n';
    }
    void head(const char* name, const std::string& labels, const char* extra) {
        text += name;
        text += '{';
        text += labels;
        if (extra != nullptr && *extra != '\0') {
            text += ',';
            text += extra;
        }
        text += "} ";
    }
    void family(const char* name, const char* type, const char* help) {
        add("# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
    }
};

void sum_into(PathStats* a, const PathStats& b) {
    a->bytes_sent += b.bytes_sent;
    a->bytes_recv += b.bytes_recv;
    a->send_completions += b.send_completions;
    a->recv_completions += b.recv_completions;
    a->send_bw += b.send_bw;
    a->recv_bw += b.recv_bw;
    a->outstanding_reqs += b.outstanding_reqs;
    a->outstanding_bytes += b.outstanding_bytes;
    a->failures += b.failures;
    a->events += b.events;
}

std::string ring_labels(const RingView& v) {
    char buf[64];
    snprintf(buf, sizeof(buf), "%016" PRIx64, v.comm_hash);
    return "vccl_job=\"" + label_value(v.job) + "\",comm=\"" + buf + "\",rank=\"" + std::to_string(v.rank) + "\"";
}

/* The rows of one ring: the max_peers peers with the most bytes as they are, the others summed per path. */
void ring_rows(const RingView& v, const std::string& rl, int max_peers, std::vector<Row>* rows, size_t* folded) {
    std::map<int, uint64_t> peer_bytes;
    for (const PathStats& s : v.paths) peer_bytes[s.peer] += s.bytes_sent + s.bytes_recv;
    std::vector<std::pair<int, uint64_t>> order(peer_bytes.begin(), peer_bytes.end());
    std::stable_sort(order.begin(), order.end(), [](const std::pair<int, uint64_t>& a, const std::pair<int, uint64_t>& b) {
        return a.second > b.second;
    });
    std::map<int, bool> kept;
    for (size_t i = 0; i < order.size(); ++i) kept[order[i].first] = int(i) < max_peers;
    *folded = order.size() > size_t(max_peers) ? order.size() - size_t(max_peers) : 0;
    std::string pl[kMaxPathsPerPeer];
    for (int p = 0; p < kMaxPathsPerPeer; ++p) pl[p] = std::string(",path=\"") + kPathNames[p] + "\"";
    Row other[kMaxPathsPerPeer];
    bool any_other[kMaxPathsPerPeer] = {};
    for (size_t i = 0; i < v.paths.size(); ++i) {
        const PathStats& s = v.paths[i];
        const int path = s.path >= 0 && s.path < kMaxPathsPerPeer ? s.path : 0;
        if (kept[s.peer]) {
            Row r;
            r.labels = rl + ",peer=\"" + std::to_string(s.peer) + "\"" + pl[path];
            r.stats = s;
            r.totals = v.totals[i];
            rows->push_back(std::move(r));
            continue;
        }
        Row& o = other[path];
        if (!any_other[path]) {
            any_other[path] = true;
            o.labels = rl + ",peer=\"other\"" + pl[path];
            o.stats = PathStats();
            o.aggregate = true;
        }
        sum_into(&o.stats, s);
        o.totals.add(v.totals[i]);
    }
    for (int p = 0; p < kMaxPathsPerPeer; ++p) {
        if (any_other[p]) rows->push_back(std::move(other[p]));
    }
}

} // namespace

std::string label_value(const std::string& s) {
    std::string out;
    out.reserve(s.size());
    for (char ch : s) {
        unsigned char c = static_cast<unsigned char>(ch);
        if (c == '\\') out += "\\\\";
        else if (c == '"') out += "\\\"";
        else if (c == '\n') out += "\\n";
        else if (c < 0x20 || c >= 0x7f) out += '_';
        else out += ch;
    }
    return out;
}

ScrapeInput read_scrape(const std::string& dir, RingCache* cache) {
    ScrapeInput in;
    uint64_t t0 = vccl::now_ns();
    in.rings = cache != nullptr ? cache->scan(dir, &in.problems) : scan_rings(dir, &in.problems);
    in.read_seconds = double(vccl::now_ns() - t0) / 1e9;
    return in;
}

/* The collective families' help (telemetry/telemetry.h on_collective says what is counted where). */
constexpr const char* kCollCallsHelp =
    "Collective calls of the rank, by kind, on host and device buffers (not CUDA graph replays).";
constexpr const char* kCollBytesHelp = "Bytes of the callers' buffers in those calls (count x datatype size).";
constexpr const char* kCollSecondsHelp =
    "Time spent in those calls: host algorithms as measured (device buffers staged through host memory: their host "
    "pieces); collectives the GPUs run among themselves: device time of one call in 64, counted for 64.";

std::string render_metrics(const ScrapeInput& in, const MetricsOptions& options, uint64_t now_ns) {
    Out o;
    std::vector<const RingView*> rings;
    for (const RingView& v : in.rings) {
        if (options.job.empty() || v.job == options.job) rings.push_back(&v);
    }
    std::vector<std::string> rls;
    std::vector<Row> rows;
    std::vector<size_t> folded(rings.size(), 0);
    size_t path_count = 0;
    for (const RingView* v : rings) path_count += v->paths.size();
    rows.reserve(path_count);
    for (size_t i = 0; i < rings.size(); ++i) {
        rls.push_back(ring_labels(*rings[i]));
        ring_rows(*rings[i], rls.back(), options.max_peers < 0 ? 0 : options.max_peers, &rows, &folded[i]);
    }
    o.text.reserve(rows.size() * 1400 + rings.size() * 1200 + 4096);

    // Rings.
    o.family("vccl_ring_info", "gauge", "A telemetry ring (one rank of one communicator); its description in labels.");
    for (size_t i = 0; i < rings.size(); ++i) {
        const RingView& v = *rings[i];
        o.add("vccl_ring_info{%s,comm_name=\"%s\",host=\"%s\",nranks=\"%d\",pid=\"%d\",status=\"%s\"} 1\n",
              rls[i].c_str(), label_value(v.comm_name).c_str(), label_value(v.host).c_str(), v.nranks, v.pid,
              ring_status(v));
    }
    // Each ring's paths: role and rail once here rather than on every path sample (a join in PromQL adds them:
    // the 64 x 64 x 2 scrape would grow by a fifth with them on every line).
    o.family("vccl_path_info", "gauge",
             "A path index of a ring: what it does (role) and its network devices (rail, \"\" when the transport chose).");
    for (size_t i = 0; i < rings.size(); ++i) {
        const RingView& v = *rings[i];
        for (int p = 0; p < kMaxPathsPerPeer; ++p) {
            o.add("vccl_path_info{%s,path=\"%s\",role=\"%s\",rail=\"%s\"} 1\n", rls[i].c_str(), kPathNames[p],
                  path_role(v, p), label_value(v.path_devices[p]).c_str());
        }
    }
    o.family("vccl_ring_records_total", "counter", "Records the rank wrote to its ring.");
    for (size_t i = 0; i < rings.size(); ++i) o.sample("vccl_ring_records_total", rls[i], nullptr, rings[i]->records);
    o.family("vccl_ring_records_overwritten_total", "counter",
             "Records overwritten by newer ones (the ring holds the last `capacity`): lost to a reader that was not reading.");
    for (size_t i = 0; i < rings.size(); ++i) {
        const RingView& v = *rings[i];
        o.sample("vccl_ring_records_overwritten_total", rls[i], nullptr,
                 uint64_t(v.records > v.capacity ? v.records - v.capacity : 0));
    }
    o.family("vccl_ring_heartbeat_age_seconds", "gauge", "Seconds since the rank last published to its ring.");
    for (size_t i = 0; i < rings.size(); ++i) {
        const RingView& v = *rings[i];
        o.sample("vccl_ring_heartbeat_age_seconds", rls[i], nullptr,
                 now_ns > v.heartbeat_ns ? double(now_ns - v.heartbeat_ns) / 1e9 : 0.0);
    }
    o.family("vccl_path_aggregated_peers", "gauge",
             "Peers of the rank summed into peer=\"other\" (beyond --max-peers, by fewest bytes).");
    for (size_t i = 0; i < rings.size(); ++i) o.sample("vccl_path_aggregated_peers", rls[i], nullptr, uint64_t(folded[i]));

    // Collectives: one family per counter, a sample per ring and kind that ran.
    std::string kinds[kCollKinds];
    for (int c = 1; c < kCollKinds; ++c) kinds[c] = std::string("coll=\"") + vccl::telemetry::coll_kind_name(uint8_t(c)) + "\"";
    auto coll_family = [&](const char* name, const char* help, auto value) {
        o.family(name, "counter", help);
        for (size_t i = 0; i < rings.size(); ++i) {
            for (int c = 1; c < kCollKinds; ++c) {
                const CollTotalsCopy& t = rings[i]->colls[c];
                if (t.calls == 0) continue;
                o.sample(name, rls[i], kinds[c].c_str(), value(t));
            }
        }
    };
    coll_family("vccl_coll_calls_total", kCollCallsHelp, [](const CollTotalsCopy& t) { return t.calls; });
    coll_family("vccl_coll_bytes_total", kCollBytesHelp, [](const CollTotalsCopy& t) { return t.bytes; });
    coll_family("vccl_coll_seconds_total", kCollSecondsHelp,
                [](const CollTotalsCopy& t) { return double(t.time_ns) / 1e9; });

    // Paths.
    o.family("vccl_path_bytes_total", "counter", "Bytes of completed transfers on the path, by direction.");
    for (const Row& r : rows) {
        o.sample("vccl_path_bytes_total", r.labels, "dir=\"send\"", r.stats.bytes_sent);
        o.sample("vccl_path_bytes_total", r.labels, "dir=\"recv\"", r.stats.bytes_recv);
    }
    o.family("vccl_path_completions_total", "counter", "Completed transfers on the path, by direction.");
    for (const Row& r : rows) {
        o.sample("vccl_path_completions_total", r.labels, "dir=\"send\"", r.stats.send_completions);
        o.sample("vccl_path_completions_total", r.labels, "dir=\"recv\"", r.stats.recv_completions);
    }
    o.family("vccl_path_failures_total", "counter", "Transfers on the path that ended with an error.");
    for (const Row& r : rows) o.sample("vccl_path_failures_total", r.labels, nullptr, r.stats.failures);
    o.family("vccl_path_bandwidth_bytes_per_second", "gauge",
             "Bandwidth over the last VCCL_TELEMETRY_WINDOW timed completions, by direction (summed for peer=\"other\").");
    for (const Row& r : rows) {
        o.sample("vccl_path_bandwidth_bytes_per_second", r.labels, "dir=\"send\"", r.stats.send_bw);
        o.sample("vccl_path_bandwidth_bytes_per_second", r.labels, "dir=\"recv\"", r.stats.recv_bw);
    }
    o.family("vccl_path_outstanding_requests", "gauge", "Transfers posted on the path and not completed.");
    for (const Row& r : rows) o.sample("vccl_path_outstanding_requests", r.labels, nullptr, r.stats.outstanding_reqs);
    o.family("vccl_path_outstanding_bytes", "gauge", "Bytes of those transfers.");
    for (const Row& r : rows) o.sample("vccl_path_outstanding_bytes", r.labels, nullptr, r.stats.outstanding_bytes);
    o.family("vccl_path_state", "gauge", "Path state: 0 up, 1 down, 2 standby, 3 unused (not for peer=\"other\").");
    for (const Row& r : rows) {
        if (!r.aggregate) o.sample("vccl_path_state", r.labels, nullptr, uint64_t(r.stats.state));
    }
    o.family("vccl_path_state_changes_total", "counter", "State changes of the path (failovers, failbacks, losses).");
    for (const Row& r : rows) o.sample("vccl_path_state_changes_total", r.labels, nullptr, r.stats.events);
    o.family("vccl_path_failovers_total", "counter", "Times traffic left the path because it failed, by cause (causes seen so far).");
    for (const Row& r : rows) {
        for (int c = 0; c < kSwitchCauses; ++c) {
            if (r.totals.failovers[c] != 0) o.add("vccl_path_failovers_total{%s,cause=\"%s\"} %" PRIu64 "\n",
                                                  r.labels.c_str(), vccl::telemetry::switch_cause_name(c), r.totals.failovers[c]);
        }
    }
    o.family("vccl_path_failbacks_total", "counter", "Times traffic came back to the path (the primary) after it healed.");
    for (const Row& r : rows) o.sample("vccl_path_failbacks_total", r.labels, nullptr, r.totals.failbacks);
    o.family("vccl_path_send_latency_seconds", "histogram",
             "Post-to-completion time of timed sends on the path (paths that timed a send).");
    char le[kLatencyBuckets / 2][40]; // le="..." of the exported bounds, formatted once
    for (int b = 0; b < kLatencyBuckets - 1; b += 2) {
        snprintf(le[b / 2], sizeof(le[b / 2]), "le=\"%.12g\"", double(vccl::telemetry::latency_bucket_upper_ns(b)) / 1e9);
    }
    for (const Row& r : rows) {
        const uint64_t count = r.totals.latency_count();
        if (count == 0) continue;
        uint64_t cumulative = 0;
        // Every second power of two of the ring's buckets (1.024 us x 4^k): the cumulative counts are exact.
        for (int b = 0; b < kLatencyBuckets - 1; ++b) {
            cumulative += r.totals.latency[b];
            if (b % 2 != 0) continue;
            o.sample("vccl_path_send_latency_seconds_bucket", r.labels, le[b / 2], cumulative);
        }
        o.sample("vccl_path_send_latency_seconds_bucket", r.labels, "le=\"+Inf\"", count);
        o.sample("vccl_path_send_latency_seconds_sum", r.labels, nullptr, double(r.totals.latency_sum_ns) / 1e9);
        o.sample("vccl_path_send_latency_seconds_count", r.labels, nullptr, count);
    }

    // The scrape itself.
    o.family("vccl_ring_unreadable", "gauge", "A vccl-* file of this user that could not be read as a ring, with the reason.");
    for (const RingProblem& p : in.problems) {
        o.add("vccl_ring_unreadable{file=\"%s\",reason=\"%s\"} 1\n", label_value(p.file).c_str(),
              label_value(p.reason).c_str());
    }
    o.family("vccl_scrape_rings", "gauge", "Rings read by this scrape.");
    o.add("vccl_scrape_rings %zu\n", rings.size());
    o.family("vccl_scrape_unreadable_rings", "gauge", "vccl-* files this scrape could not read.");
    o.add("vccl_scrape_unreadable_rings %zu\n", in.problems.size());
    o.family("vccl_scrape_read_seconds", "gauge", "Time this scrape spent reading the rings.");
    o.add("vccl_scrape_read_seconds %.6f\n", in.read_seconds);
    return o.text;
}

} // namespace vtel
