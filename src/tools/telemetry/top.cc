/* SPDX-License-Identifier: BSD-3-Clause */
/* vccl-telemetry top: every ring of this user in /dev/shm, one line per rank and link, refreshed. */
#include <unistd.h>

#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "core/clock.h"
#include "tools/telemetry/tool.h"

namespace vtel {

using vccl::telemetry::PathStats;

namespace {

/* ", rails 0=D0 1=D1, spray": the host paths' network devices as the ring describes them ("" when it does not). */
std::string rails_text(const RingView& v) {
    std::string out;
    for (int p = 0; p < vccl::telemetry::kDevicePath; ++p) {
        if (v.path_devices[p].empty()) continue;
        out += (out.empty() ? ", rails " : " ") + std::to_string(p) + "=" + v.path_devices[p];
    }
    if (v.spray) out += ", spray";
    return out;
}

void print_text(const std::vector<RingView>& rings, const std::string& dir) {
    uint64_t now = vccl::now_ns();
    printf("vccl-telemetry top: %zu ring(s) in %s\n", rings.size(), dir.c_str());
    printf("%-44s %5s %5s %4s %-7s %10s %10s %6s %10s %10s %10s %6s %9s\n", "RING", "RANK", "PEER", "PATH", "STATE",
           "TX GB/s", "RX GB/s", "OUTST", "OUT BYTES", "SENT", "RECEIVED", "SHARE", "LAST ms");
    for (const RingView& v : rings) {
        printf("%-44s %5d %5s %4s %-7s   [%s, %d ranks, pid %d, %" PRIu64 " records, %s%s]\n", v.file.c_str(), v.rank,
               "-", "-", "-", v.comm_name.c_str(), v.nranks, v.pid, v.records, ring_status(v), rails_text(v).c_str());
        for (const PathStats& p : v.paths) {
            double last_ms = p.last_done_ns != 0 && now > p.last_done_ns ? double(now - p.last_done_ns) / 1e6 : -1;
            char last[32];
            if (last_ms < 0) snprintf(last, sizeof(last), "-");
            else snprintf(last, sizeof(last), "%.1f", last_ms);
            printf("%-44s %5d %5d %4d %-7s %10.3f %10.3f %6" PRIu64 " %10s %10s %10s %6s %9s\n", "", v.rank, p.peer,
                   p.path, vccl::telemetry::path_state_name(p.state), p.send_bw / 1e9, p.recv_bw / 1e9,
                   p.outstanding_reqs, human_bytes(double(p.outstanding_bytes)).c_str(),
                   human_bytes(double(p.bytes_sent)).c_str(), human_bytes(double(p.bytes_recv)).c_str(),
                   share_text(path_share(v, p)).c_str(), last);
        }
    }
    size_t dead = 0;
    for (const RingView& v : rings) dead += v.alive ? 0 : 1;
    if (dead > 0) printf("%zu ring(s) of processes that are gone: vccl-telemetry clean removes them\n", dead);
}

void print_json(const std::vector<RingView>& rings) {
    printf("[");
    for (size_t i = 0; i < rings.size(); ++i) {
        const RingView& v = rings[i];
        printf("%s\n {\"ring\":%s,\"job\":%s,\"comm\":\"%016" PRIx64 "\",\"name\":%s,\"host\":%s,\"rank\":%d,"
               "\"nranks\":%d,\"pid\":%d,\"status\":\"%s\",\"records\":%" PRIu64 ",\"multipath\":\"%s\",\"links\":[",
               i ? "," : "", json_str(v.file).c_str(), json_str(v.job).c_str(), v.comm_hash,
               json_str(v.comm_name).c_str(), json_str(v.host).c_str(), v.rank, v.nranks, v.pid, ring_status(v),
               v.records, v.spray ? "spray" : "standby");
        for (size_t j = 0; j < v.paths.size(); ++j) {
            const PathStats& p = v.paths[j];
            printf("%s{\"peer\":%d,\"path\":%d,\"rail\":%s,\"state\":\"%s\",\"send_bw\":%.0f,\"recv_bw\":%.0f,"
                   "\"outstanding_reqs\":%" PRIu64 ",\"outstanding_bytes\":%" PRIu64 ",\"bytes_sent\":%" PRIu64
                   ",\"bytes_recv\":%" PRIu64 ",\"share\":%.4f,\"completions\":%" PRIu64 ",\"failures\":%" PRIu64
                   "}",
                   j ? "," : "", p.peer, p.path, json_str(v.path_devices[p.path]).c_str(), vccl::telemetry::path_state_name(p.state), p.send_bw, p.recv_bw,
                   p.outstanding_reqs, p.outstanding_bytes, p.bytes_sent, p.bytes_recv, path_share(v, p),
                   p.send_completions + p.recv_completions, p.failures);
        }
        printf("]}");
    }
    printf("\n]\n");
}

} // namespace

int cmd_top(int argc, char** argv) {
    double interval = 1.0;
    bool once = false, json = false;
    std::string dir = "/dev/shm";
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        if ((a == "-i" || a == "--interval") && i + 1 < argc) {
            interval = atof(argv[++i]);
            if (interval < 0.05) interval = 0.05;
        } else if (a == "--once" || a == "-1") {
            once = true;
        } else if (a == "--json") {
            json = true;
            once = true;
        } else if (a == "--dir" && i + 1 < argc) {
            dir = argv[++i];
        } else if (a == "-h" || a == "--help") {
            printf("usage: vccl-telemetry top [-i SECONDS] [--once] [--json] [--dir DIR]\n");
            return 0;
        } else {
            fprintf(stderr, "vccl-telemetry top: unknown option '%s'\n", a.c_str());
            return 2;
        }
    }
    bool tty = isatty(STDOUT_FILENO) != 0;
    while (true) {
        std::vector<RingView> rings = scan_rings(dir);
        if (json) {
            print_json(rings);
        } else {
            if (!once && tty) printf("\033[H\033[2J");
            print_text(rings, dir);
        }
        fflush(stdout);
        if (once) return 0;
        usleep(useconds_t(interval * 1e6));
    }
}

} // namespace vtel
