/* SPDX-License-Identifier: BSD-3-Clause */
/* Ring discovery for vccl-telemetry top and vccl-diag paths (see rings.h). */
#include "tools/telemetry/rings.h"

#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "telemetry/ring.h"

namespace vtel {

using vccl::telemetry::Header;
using vccl::telemetry::RingReader;

std::vector<RingView> scan_rings(const std::string& dir) {
    std::vector<RingView> out;
    DIR* d = opendir(dir.c_str());
    if (d == nullptr) return out;
    while (struct dirent* e = readdir(d)) {
        if (strncmp(e->d_name, "vccl-", 5) != 0) continue;
        std::string path = dir + "/" + e->d_name;
        struct stat st;
        if (stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != getuid()) continue;
        RingReader reader;
        std::string why;
        if (!reader.attach(path, &why)) continue; // not a ring (yet): skip quietly
        const Header& h = reader.header();
        RingView v;
        v.file = e->d_name;
        v.job = h.job;
        v.comm_name = h.comm_name;
        v.host = h.host;
        v.comm_hash = h.comm_hash;
        v.rank = h.rank;
        v.nranks = h.nranks;
        v.pid = h.pid;
        v.closed = h.closed.load() != 0;
        v.alive = kill(h.pid, 0) == 0 || errno == EPERM;
        v.records = reader.write_index();
        v.heartbeat_ns = h.heartbeat_ns.load();
        v.paths = reader.paths();
        out.push_back(std::move(v));
        // detached here: the reader unmaps; the writer never notices
    }
    closedir(d);
    std::sort(out.begin(), out.end(), [](const RingView& a, const RingView& b) {
        return a.comm_hash != b.comm_hash ? a.comm_hash < b.comm_hash : a.rank < b.rank;
    });
    return out;
}

const char* ring_status(const RingView& v) { return !v.alive ? "dead" : v.closed ? "closed" : "live"; }

std::string json_str(const std::string& s) {
    std::string out = "\"";
    for (char c : s) {
        if (c == '"' || c == '\\') out += '\\';
        if (static_cast<unsigned char>(c) >= 0x20) out += c;
    }
    return out + "\"";
}

std::string human_bytes(double b) {
    const char* units[] = {"B", "KB", "MB", "GB", "TB"};
    int u = 0;
    while (b >= 1000.0 && u < 4) {
        b /= 1000.0;
        ++u;
    }
    char buf[32];
    snprintf(buf, sizeof(buf), u == 0 ? "%.0f %s" : "%.2f %s", b, units[u]);
    return buf;
}

} // namespace vtel
