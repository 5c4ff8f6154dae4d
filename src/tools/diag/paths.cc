/* SPDX-License-Identifier: BSD-3-Clause */
/* vccl-diag paths: the state of every path of every live telemetry ring on this node. A down path means a
 * connection runs without its standby (or not at all); events > 0 mean a peer's traffic has switched paths
 * at least once, which a healthy fabric never causes. */
#include <cinttypes>
#include <cstdio>
#include <set>

#include "tools/diag/diag.h"

namespace vdiag {

using vccl::telemetry::PathState;
using vccl::telemetry::PathStats;
using vtel::json_str;

std::vector<std::string> path_findings(const vtel::RingView& ring) {
    std::vector<std::string> out;
    if (!ring.alive || ring.closed) return out;
    char buf[256];
    std::set<int> peers_with_events;
    for (const PathStats& p : ring.paths) {
        if (p.state == uint32_t(PathState::Down)) {
            snprintf(buf, sizeof(buf), "%s rank %d: path %d to peer %d is down", ring.file.c_str(), ring.rank, p.path,
                     p.peer);
            out.push_back(buf);
        }
        if (p.events > 0) peers_with_events.insert(p.peer);
    }
    for (int peer : peers_with_events) {
        uint64_t events = 0;
        for (const PathStats& p : ring.paths)
            if (p.peer == peer) events += p.events;
        snprintf(buf, sizeof(buf), "%s rank %d: peer %d had %" PRIu64 " path state change(s) (failover/failback)",
                 ring.file.c_str(), ring.rank, peer, events);
        out.push_back(buf);
    }
    return out;
}

void check_paths(const std::string& dir, Section* out) {
    out->name = "paths";
    std::vector<vtel::RingView> rings = vtel::scan_rings(dir);
    char line[384];
    std::string t = "paths: " + std::to_string(rings.size()) + " telemetry ring(s) in " + dir + "\n";
    if (rings.empty()) t += "  note: no vccl job of this user is running on this node (nothing to check)\n";
    std::string j = "{\"dir\":" + json_str(dir) + ",\"rings\":[";
    for (size_t i = 0; i < rings.size(); ++i) {
        const vtel::RingView& r = rings[i];
        snprintf(line, sizeof(line), "  %s: rank %d of %d, %s, pid %d, %s\n", r.file.c_str(), r.rank, r.nranks,
                 r.comm_name.c_str(), r.pid, vtel::ring_status(r));
        t += line;
        snprintf(line, sizeof(line), "    %5s %4s %-7s %7s %10s %10s %6s %10s %6s\n", "PEER", "PATH", "STATE", "EVENTS",
                 "TX GB/s", "RX GB/s", "OUTST", "OUT BYTES", "SHARE");
        t += line;
        j += std::string(i ? "," : "") + "{\"ring\":" + json_str(r.file) + ",\"job\":" + json_str(r.job) +
             ",\"host\":" + json_str(r.host) + ",\"rank\":" + std::to_string(r.rank) + ",\"nranks\":" +
             std::to_string(r.nranks) + ",\"pid\":" + std::to_string(r.pid) + ",\"status\":\"" +
             vtel::ring_status(r) + "\",\"paths\":[";
        for (size_t k = 0; k < r.paths.size(); ++k) {
            const PathStats& p = r.paths[k];
            const char* state = vccl::telemetry::path_state_name(p.state);
            double share = vtel::path_share(r, p);
            snprintf(line, sizeof(line), "    %5d %4d %-7s %7" PRIu64 " %10.3f %10.3f %6" PRIu64 " %10s %6s\n", p.peer,
                     p.path, state, p.events, p.send_bw / 1e9, p.recv_bw / 1e9, p.outstanding_reqs,
                     vtel::human_bytes(double(p.outstanding_bytes)).c_str(), vtel::share_text(share).c_str());
            t += line;
            snprintf(line, sizeof(line), "%s{\"peer\":%d,\"path\":%d,\"state\":\"%s\",\"events\":%" PRIu64
                     ",\"send_bw\":%.0f,\"recv_bw\":%.0f,\"outstanding_reqs\":%" PRIu64 ",\"outstanding_bytes\":%"
                     PRIu64 ",\"bytes_sent\":%" PRIu64 ",\"bytes_recv\":%" PRIu64 ",\"share\":%.4f}", k ? "," : "",
                     p.peer, p.path, state, p.events, p.send_bw, p.recv_bw, p.outstanding_reqs, p.outstanding_bytes,
                     p.bytes_sent, p.bytes_recv, share);
            j += line;
        }
        j += "]}";
        for (std::string& f : path_findings(r)) out->findings.push_back(std::move(f));
    }
    out->text = t;
    out->json = j + "]}";
}

} // namespace vdiag
