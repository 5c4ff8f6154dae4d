/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * vccl-telemetry report: per-link and per-rank summary of VCCL_TELEMETRY_DIR files.
 *
 * Link bandwidth = bytes / busy time, where busy time is the union (in completion order) of the transfers'
 * [start, done] intervals. A collective transfer starts when both ends have posted it: the later of its own
 * post and the post of the matching transfer on the peer (the k-th send from A to B in a collective matches
 * the k-th receive at B from A, as tag matching does). A receive posted early therefore does not count the
 * time its sender spent waiting for a third, late rank; such waiting is charged to lateness, not to a link.
 * When the peer's record is missing (ring overwritten), the peer's arrival at the collective stands in. Lateness of a rank at a collective = its arrival minus
 * the median arrival of all ranks at that collective (times are wall clock: on several hosts they are only
 * as good as the hosts' clock synchronisation).
 */
#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "tools/telemetry/tool.h"

namespace vtel {

namespace {

template <typename T>
T median(std::vector<T> v) {
    if (v.empty()) return T();
    std::sort(v.begin(), v.end());
    size_t n = v.size();
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

struct Link {
    std::string comm;
    int rank, peer, path;
    bool send;
    uint64_t transfers = 0, failures = 0, bytes = 0;
    int64_t busy_ns = 0;
    double bw = 0;
    bool slow = false;
    // Post-to-completion latency of the link's successful transfers, ns, nearest rank (0: none).
    int64_t p50 = 0, p99 = 0, p999 = 0;
};

/* The q-quantile of sorted values by nearest rank: the smallest value with at least q of them at or below it. */
int64_t nearest_rank(const std::vector<int64_t>& sorted, double q) {
    if (sorted.empty()) return 0;
    size_t k = size_t(q * double(sorted.size()) + 0.999999999);
    if (k < 1) k = 1;
    if (k > sorted.size()) k = sorted.size();
    return sorted[k - 1];
}

struct RankSum {
    uint64_t sent = 0, received = 0, transfers = 0, failures = 0, events = 0;
    std::set<std::pair<std::string, uint64_t>> colls;
    std::vector<int64_t> lateness;
    int64_t late_median = 0, late_max = 0;
    bool late = false;
};

} // namespace

namespace {

struct ReportOptions {
    double fraction = 0.5; // SLOW below this share of the median link of its kind
    double late_us = 1000.0;
    bool json = false;
    std::vector<std::string> files;
};

/* What report computes from the files. */
struct Analysis {
    std::vector<Row> rows;
    uint64_t dropped = 0;
    // Arrival of each rank at each collective: its first post with that sequence number.
    std::map<std::pair<std::string, uint64_t>, std::map<int, int64_t>> arrival;
    std::map<int, RankSum> ranks;
    std::map<const Row*, int64_t> partner_post;
    std::vector<Link> links;
    double med_of_kind[2] = {0, 0}; // host transport's links, device-path links
    double med_bw = 0;
};

/* 0: parsed; else the exit status (help printed, or a usage error). */
int parse_report_args(int argc, char** argv, ReportOptions* o) {
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        if ((a == "--fraction" || a == "-f") && i + 1 < argc) {
            o->fraction = atof(argv[++i]);
        } else if (a == "--late-us" && i + 1 < argc) {
            o->late_us = atof(argv[++i]);
        } else if (a == "--json") {
            o->json = true;
        } else if (a == "-h" || a == "--help") {
            printf("usage: vccl-telemetry report [--fraction F] [--late-us US] [--json] FILE...\n");
            return -1;
        } else if (!a.empty() && a[0] == '-') {
            fprintf(stderr, "vccl-telemetry report: unknown option '%s'\n", a.c_str());
            return 2;
        } else {
            o->files.push_back(a);
        }
    }
    if (o->files.empty()) {
        fprintf(stderr, "vccl-telemetry report: no files (the .csv or .jsonl files of VCCL_TELEMETRY_DIR)\n");
        return 2;
    }
    return 0;
}

/* The rows of every file, each rank's once. False (with the message printed) when a file cannot be read. */
bool load_rows(const ReportOptions& o, Analysis* an) {
    std::set<std::pair<std::string, int>> seen; // (comm, rank): a rank's .csv and .jsonl hold the same rows
    for (const std::string& f : o.files) {
        std::vector<Row> mine;
        std::string why;
        if (!load_file(f, &mine, &an->dropped, &why)) {
            fprintf(stderr, "vccl-telemetry report: %s: %s\n", f.c_str(), why.c_str());
            return false;
        }
        if (mine.empty()) continue;
        auto key = std::make_pair(mine[0].comm, mine[0].rank);
        if (seen.count(key)) continue;
        seen.insert(key);
        an->rows.insert(an->rows.end(), mine.begin(), mine.end());
    }
    return true;
}

/* Each rank's arrival at each collective, and its lateness against the median arrival. */
void find_arrivals(Analysis* an) {
    for (const Row& r : an->rows) {
        if (r.event || r.coll == "p2p") continue;
        auto& m = an->arrival[{r.comm, r.seq}];
        auto it = m.find(r.rank);
        if (it == m.end() || r.post_ns < it->second) m[r.rank] = r.post_ns;
    }
    for (const auto& c : an->arrival) {
        if (c.second.size() < 2) continue;
        std::vector<int64_t> times;
        for (const auto& kv : c.second) times.push_back(kv.second);
        int64_t med = median(times);
        for (const auto& kv : c.second) an->ranks[kv.first].lateness.push_back(kv.second - med);
    }
}

/* The post time of each collective transfer's partner on the other rank (see the comment at the top). */
void pair_partners(Analysis* an) {
    using PairKey = std::tuple<std::string, uint64_t, int, int>; // comm, seq, sender, receiver
    std::map<PairKey, std::vector<const Row*>> sends, recvs;
    for (const Row& r : an->rows) {
        if (r.event || r.coll == "p2p" || r.status != 0) continue;
        if (r.send) sends[PairKey(r.comm, r.seq, r.rank, r.peer)].push_back(&r);
        else recvs[PairKey(r.comm, r.seq, r.peer, r.rank)].push_back(&r);
    }
    auto by_post = [](const Row* a, const Row* b) { return a->post_ns < b->post_ns; };
    for (auto& kv : sends) {
        auto it = recvs.find(kv.first);
        if (it == recvs.end()) continue;
        std::vector<const Row*>& s = kv.second;
        std::vector<const Row*>& rv = it->second;
        std::sort(s.begin(), s.end(), by_post);
        std::sort(rv.begin(), rv.end(), by_post);
        if (s.size() != rv.size()) continue; // records missing on one side: pairing would be a guess
        for (size_t k = 0; k < s.size(); ++k) {
            an->partner_post[s[k]] = rv[k]->post_ns;
            an->partner_post[rv[k]] = s[k]->post_ns;
        }
    }
}

/* Per link (comm, rank, peer, path, direction): transfers, bytes, and the busy time, each transfer counted from the
 * later of its post, its partner's post (or the peer's arrival) and the previous transfer's end. Per rank: totals. */
void build_links(Analysis* an) {
    std::map<std::tuple<std::string, int, int, int, bool>, std::vector<const Row*>> by_link;
    for (const Row& r : an->rows) {
        RankSum& rs = an->ranks[r.rank];
        if (r.event) {
            rs.events++;
            continue;
        }
        by_link[std::make_tuple(r.comm, r.rank, r.peer, r.path, r.send)].push_back(&r);
        rs.transfers++;
        if (r.status != 0) rs.failures++;
        else if (r.send) rs.sent += r.bytes;
        else rs.received += r.bytes;
        if (r.coll != "p2p") rs.colls.insert({r.comm, r.seq});
    }
    for (auto& kv : by_link) {
        Link l;
        std::tie(l.comm, l.rank, l.peer, l.path, l.send) = kv.first;
        std::vector<const Row*>& v = kv.second;
        std::sort(v.begin(), v.end(), [](const Row* a, const Row* b) { return a->done_ns < b->done_ns; });
        int64_t last_done = INT64_MIN;
        std::vector<int64_t> latency;
        for (const Row* r : v) {
            l.transfers++;
            if (r->status != 0) {
                l.failures++;
                continue;
            }
            latency.push_back(r->done_ns > r->post_ns ? r->done_ns - r->post_ns : 0);
            int64_t start = r->post_ns;
            auto partner = an->partner_post.find(r);
            if (partner != an->partner_post.end()) {
                if (partner->second > start) start = partner->second;
            } else if (r->coll != "p2p") {
                auto a = an->arrival.find({r->comm, r->seq});
                if (a != an->arrival.end()) {
                    auto p = a->second.find(r->peer);
                    if (p != a->second.end() && p->second > start) start = p->second;
                }
            }
            if (last_done > start) start = last_done;
            if (r->done_ns > start) l.busy_ns += r->done_ns - start;
            if (r->done_ns > last_done) last_done = r->done_ns;
            l.bytes += r->bytes;
        }
        l.bw = l.busy_ns > 0 ? double(l.bytes) * 1e9 / double(l.busy_ns) : 0;
        std::sort(latency.begin(), latency.end());
        l.p50 = nearest_rank(latency, 0.5);
        l.p99 = nearest_rank(latency, 0.99);
        l.p999 = nearest_rank(latency, 0.999);
        an->links.push_back(l);
    }
}

int link_kind(int path) { return path == 2 ? 1 : 0; }

/* Slow links and late ranks. */
void judge(const ReportOptions& o, Analysis* an) {
    // Links are compared with links of their own kind: the device path (path 2, GPUs of one host over NVLink or
    // PCIe) moves tens to hundreds of GB/s, the host transport's paths (0 and 1) a few; one median over both
    // would call every network link slow in a job that has both. Device-path links are never called slow: their
    // records run from the host's enqueue to the poll that saw them done (telemetry/device_flows.h), so their
    // bandwidth is a lower bound that a rank which polled late or queued more work makes low (vccl-diag
    // measures those links).
    for (int k = 0; k < 2; ++k) {
        std::vector<double> bws;
        for (const Link& l : an->links) {
            if (l.busy_ns > 0 && link_kind(l.path) == k) bws.push_back(l.bw);
        }
        an->med_of_kind[k] = median(bws);
    }
    an->med_bw = an->med_of_kind[0] > 0 ? an->med_of_kind[0] : an->med_of_kind[1];
    for (Link& l : an->links) {
        const double med = an->med_of_kind[link_kind(l.path)];
        l.slow = link_kind(l.path) == 0 && l.busy_ns > 0 && med > 0 && l.bw < o.fraction * med;
    }
    for (auto& kv : an->ranks) {
        RankSum& rs = kv.second;
        rs.late_median = median(rs.lateness);
        for (int64_t x : rs.lateness) rs.late_max = std::max(rs.late_max, x);
        rs.late = !rs.lateness.empty() && double(rs.late_median) > o.late_us * 1000.0;
    }
}

void print_json(const ReportOptions& o, const Analysis& an) {
    printf("{\"files\":%zu,\"dropped\":%" PRIu64 ",\"fraction\":%g,\"late_us\":%g,\"median_bw\":%.0f,"
           "\"median_bw_host\":%.0f,\"median_bw_device\":%.0f,\n\"links\":[",
           o.files.size(), an.dropped, o.fraction, o.late_us, an.med_bw, an.med_of_kind[0], an.med_of_kind[1]);
    for (size_t i = 0; i < an.links.size(); ++i) {
        const Link& l = an.links[i];
        printf("%s\n {\"comm\":%s,\"rank\":%d,\"peer\":%d,\"path\":%d,\"dir\":\"%s\",\"transfers\":%" PRIu64
               ",\"failures\":%" PRIu64 ",\"bytes\":%" PRIu64 ",\"busy_ns\":%" PRId64 ",\"bw\":%.0f,\"slow\":%s,"
               "\"latency_p50_ns\":%" PRId64 ",\"latency_p99_ns\":%" PRId64 ",\"latency_p999_ns\":%" PRId64 "}",
               i ? "," : "", json_str(l.comm).c_str(), l.rank, l.peer, l.path, l.send ? "send" : "recv",
               l.transfers, l.failures, l.bytes, l.busy_ns, l.bw, l.slow ? "true" : "false", l.p50, l.p99, l.p999);
    }
    printf("],\n\"ranks\":[");
    bool first = true;
    for (const auto& kv : an.ranks) {
        const RankSum& rs = kv.second;
        printf("%s\n {\"rank\":%d,\"bytes_sent\":%" PRIu64 ",\"bytes_recv\":%" PRIu64 ",\"transfers\":%" PRIu64
               ",\"failures\":%" PRIu64 ",\"path_events\":%" PRIu64 ",\"collectives\":%zu,\"lateness_median_ns\":%" PRId64
               ",\"lateness_max_ns\":%" PRId64 ",\"late\":%s}",
               first ? "" : ",", kv.first, rs.sent, rs.received, rs.transfers, rs.failures, rs.events,
               rs.colls.size(), rs.late_median, rs.late_max, rs.late ? "true" : "false");
        first = false;
    }
    printf("]}\n");
}

void print_text(const ReportOptions& o, const Analysis& an) {
    const double fraction = o.fraction, late_us = o.late_us;
    const std::vector<Link>& links = an.links;
    const std::map<int, RankSum>& ranks = an.ranks;
    const double* med_of_kind = an.med_of_kind;
    const uint64_t dropped = an.dropped;
    printf("Links (%zu): bandwidth = bytes / busy time; SLOW below %.2f x the median of the host transport's links "
           "(%.3f GB/s); device-path links (path 2, median %.3f GB/s) are lower bounds, never flagged\n",
           links.size(), fraction, med_of_kind[0] / 1e9, med_of_kind[1] / 1e9);
    printf("%-18s %5s %5s %4s %4s %9s %8s %12s %10s %10s %9s %9s %9s  %s\n", "COMM", "RANK", "PEER", "PATH", "DIR",
           "TRANSFERS", "FAILED", "BYTES", "BUSY ms", "GB/s", "p50 us", "p99 us", "p99.9 us", "");
    for (const Link& l : links) {
        printf("%-18s %5d %5d %4d %4s %9" PRIu64 " %8" PRIu64 " %12s %10.3f %10.3f %9.1f %9.1f %9.1f  %s\n",
               l.comm.c_str(), l.rank, l.peer, l.path, l.send ? "send" : "recv", l.transfers, l.failures,
               human_bytes(double(l.bytes)).c_str(), double(l.busy_ns) / 1e6, l.bw / 1e9, double(l.p50) / 1e3,
               double(l.p99) / 1e3, double(l.p999) / 1e3, l.slow ? "SLOW" : "");
    }
    printf("(latency: post to completion of each timed transfer, percentiles by nearest rank; a receive's includes "
           "the time its sender took to post)\n");
    printf("\nRanks (%zu): lateness = arrival at a collective minus the median arrival; LATE above %.0f us\n",
           ranks.size(), late_us);
    printf("%5s %12s %12s %9s %8s %6s %6s %12s %12s  %s\n", "RANK", "SENT", "RECEIVED", "TRANSFERS", "FAILED", "EVENTS",
           "COLLS", "LATE med us", "LATE max us", "");
    for (const auto& kv : ranks) {
        const RankSum& rs = kv.second;
        printf("%5d %12s %12s %9" PRIu64 " %8" PRIu64 " %6" PRIu64 " %6zu %12.1f %12.1f  %s\n", kv.first,
               human_bytes(double(rs.sent)).c_str(), human_bytes(double(rs.received)).c_str(), rs.transfers,
               rs.failures, rs.events, rs.colls.size(), double(rs.late_median) / 1e3, double(rs.late_max) / 1e3,
               rs.late ? "LATE" : "");
    }
    printf("\nFindings:\n");
    int findings = 0;
    for (const Link& l : links) {
        if (!l.slow) continue;
        printf("  slow link: rank %d %s rank %d (path %d): %.3f GB/s, %.2f x the median\n", l.rank,
               l.send ? "->" : "<-", l.peer, l.path, l.bw / 1e9, l.bw / med_of_kind[link_kind(l.path)]);
        ++findings;
    }
    for (const auto& kv : ranks) {
        if (!kv.second.late) continue;
        printf("  late rank: rank %d arrives %.1f us after the median (median of %zu collectives)\n", kv.first,
               double(kv.second.late_median) / 1e3, kv.second.lateness.size());
        ++findings;
    }
    if (dropped > 0) {
        printf("  %" PRIu64 " records were dropped (ring overwritten before they were written; raise VCCL_TELEMETRY_RING)\n",
               dropped);
    }
    if (findings == 0) printf("  none\n");
    // Transfers under 4 MiB are timed for one collective in VCCL_TELEMETRY_SAMPLE (64): a short job leaves too
    // few for lateness (and for the links of such transfers) to mean much; the findings above (or "none") are
    // then followed by this note. The files do not say which sample the job ran with, so the note says both.
    size_t most_colls = 0;
    for (const auto& kv : ranks) most_colls = std::max(most_colls, kv.second.colls.size());
    if (most_colls > 0 && most_colls < 8) {
        printf("  note: at most %zu timed collective(s) per rank, too few to judge lateness; unless the job ran with "
               "VCCL_TELEMETRY_SAMPLE=1 (or failover), transfers under 4 MiB were timed for one collective in "
               "VCCL_TELEMETRY_SAMPLE\n", most_colls);
    }
}

} // namespace

int cmd_report(int argc, char** argv) {
    ReportOptions o;
    int parsed = parse_report_args(argc, argv, &o);
    if (parsed != 0) return parsed < 0 ? 0 : parsed;
    Analysis an;
    if (!load_rows(o, &an)) return 1;
    find_arrivals(&an);
    pair_partners(&an);
    build_links(&an);
    judge(o, &an);
    if (o.json) {
        print_json(o, an);
    } else {
        print_text(o, an);
    }
    return 0;
}

} // namespace vtel
