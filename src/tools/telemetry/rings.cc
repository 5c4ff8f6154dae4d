/* SPDX-License-Identifier: BSD-3-Clause */
/* Ring discovery for vccl-telemetry top and vccl-diag paths (see rings.h). */
#include "tools/telemetry/rings.h"

#include <dirent.h>
#include <setjmp.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <mutex>

#include "telemetry/ring.h"

namespace vtel {

using vccl::telemetry::Header;
using vccl::telemetry::PathStats;
using vccl::telemetry::RingReader;

namespace {

/* SIGBUS while reading a mapped ring (the file shrank under the mapping) jumps back to read_attached. One
 * guard per thread; a SIGBUS outside a guard keeps its default action. */
thread_local sigjmp_buf* bus_guard = nullptr;

void on_sigbus(int sig) {
    if (bus_guard != nullptr) siglongjmp(*bus_guard, 1);
    signal(sig, SIG_DFL); // not ours: the faulting access runs again and takes the default action
}

void install_bus_handler() {
    static std::once_flag once;
    std::call_once(once, [] {
        struct sigaction sa;
        memset(&sa, 0, sizeof(sa));
        sa.sa_handler = on_sigbus;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGBUS, &sa, nullptr);
    });
}

std::string bounded(const char* s, size_t cap) { return std::string(s, strnlen(s, cap)); }

/* Runs f with SIGBUS caught: false when it faulted. f must not allocate or own anything that needs a
 * destructor (a fault jumps over them). */
template <typename F>
bool guarded(F&& f) {
    sigjmp_buf env;
    if (sigsetjmp(env, 1) != 0) {
        bus_guard = nullptr;
        return false;
    }
    bus_guard = &env;
    f();
    bus_guard = nullptr;
    return true;
}

} // namespace

bool read_attached(const RingReader& reader, RingView* out, std::string* why) {
    install_bus_handler();
    const Header& h = reader.header();
    RingView v;
    uint32_t npaths = 0;
    char job[sizeof(h.job)], comm_name[sizeof(h.comm_name)], host[sizeof(h.host)];
    char devices[vccl::telemetry::kMaxPathsPerPeer][vccl::telemetry::kPathDeviceChars] = {};
    bool spray = false;
    // The header first, to size the vectors outside the guarded copies.
    bool ok = guarded([&] {
        npaths = h.npaths;
        memcpy(job, h.job, sizeof(job));
        memcpy(comm_name, h.comm_name, sizeof(comm_name));
        memcpy(host, h.host, sizeof(host));
        v.comm_hash = h.comm_hash;
        v.rank = h.rank;
        v.nranks = h.nranks;
        v.pid = h.pid;
        v.closed = h.closed.load() != 0;
        v.records = reader.write_index();
        v.capacity = h.capacity;
        v.heartbeat_ns = h.heartbeat_ns.load();
        if (h.paths_described.load(std::memory_order_acquire) == 1) {
            memcpy(devices, h.path_devices, sizeof(devices));
            spray = h.multipath == 1;
        }
    });
    // Before the paths: a dead writer's half-written slot is read as it stands (RingReader::path).
    v.alive = v.pid > 0 && (kill(v.pid, 0) == 0 || errno == EPERM);
    if (ok) {
        v.paths.reserve(npaths);
        v.totals.reserve(npaths);
        ok = guarded([&] {
            for (uint32_t i = 0; i < npaths; ++i) {
                PathStats s;
                if (!reader.path(i, &s, !v.alive)) continue;
                s.peer = int32_t(i / vccl::telemetry::kMaxPathsPerPeer); // the slot says which path it is
                s.path = int32_t(i % vccl::telemetry::kMaxPathsPerPeer);
                v.paths.push_back(s); // within the reserved capacity: no allocation
                v.totals.push_back(reader.totals(s.peer, s.path));
            }
            for (int c = 0; c < vccl::telemetry::kCollKinds; ++c) v.colls[c] = reader.coll_totals(c);
        });
    }
    if (!ok) {
        if (why != nullptr) *why = "ring truncated or replaced while read";
        return false;
    }
    v.job = bounded(job, sizeof(job));
    v.comm_name = bounded(comm_name, sizeof(comm_name));
    v.host = bounded(host, sizeof(host));
    for (int p = 0; p < vccl::telemetry::kMaxPathsPerPeer; ++p) v.path_devices[p] = bounded(devices[p], sizeof(devices[p]));
    v.spray = spray;
    *out = std::move(v);
    return true;
}

bool read_ring_file(const std::string& path, RingView* out, std::string* why) {
    RingReader reader;
    if (!reader.attach(path, why)) return false;
    if (!read_attached(reader, out, why)) return false;
    size_t slash = path.rfind('/');
    out->file = slash == std::string::npos ? path : path.substr(slash + 1);
    return true; // detached here: the reader unmaps; the writer never notices
}

std::vector<RingView> RingCache::scan(const std::string& dir, std::vector<RingProblem>* problems) {
    std::vector<RingView> out;
    for (auto& kv : entries_) kv.second.seen = false;
    DIR* d = opendir(dir.c_str());
    while (d != nullptr) {
        struct dirent* e = readdir(d);
        if (e == nullptr) break;
        if (strncmp(e->d_name, "vccl-", 5) != 0) continue;
        std::string path = dir + "/" + e->d_name;
        struct stat st;
        if (lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != getuid()) continue;
        Entry& en = entries_[e->d_name];
        en.seen = true;
        std::string why;
        if (!en.reader || en.dev != st.st_dev || en.ino != st.st_ino || en.size != st.st_size) {
            en.reader.reset(new RingReader());
            en.dev = st.st_dev;
            en.ino = st.st_ino;
            en.size = st.st_size;
            if (!en.reader->attach(path, &why)) {
                en.reader.reset(); // not a ring (yet): tried again next scan
                if (problems != nullptr) problems->push_back({e->d_name, why});
                continue;
            }
        }
        RingView v;
        if (!read_attached(*en.reader, &v, &why)) {
            en.reader.reset();
            if (problems != nullptr) problems->push_back({e->d_name, why});
            continue;
        }
        v.file = e->d_name;
        out.push_back(std::move(v));
    }
    if (d != nullptr) closedir(d);
    for (auto it = entries_.begin(); it != entries_.end();) {
        if (!it->second.seen || !it->second.reader) it = entries_.erase(it);
        else ++it;
    }
    std::sort(out.begin(), out.end(), [](const RingView& a, const RingView& b) {
        return a.comm_hash != b.comm_hash ? a.comm_hash < b.comm_hash : a.rank < b.rank;
    });
    if (problems != nullptr) {
        std::sort(problems->begin(), problems->end(),
                  [](const RingProblem& a, const RingProblem& b) { return a.file < b.file; });
    }
    return out;
}

std::vector<RingView> scan_rings(const std::string& dir, std::vector<RingProblem>* problems) {
    RingCache once;
    return once.scan(dir, problems);
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

double path_share(const RingView& v, const vccl::telemetry::PathStats& p) {
    double total = 0;
    for (const vccl::telemetry::PathStats& q : v.paths) {
        if (q.peer == p.peer) total += double(q.bytes_sent) + double(q.bytes_recv);
    }
    return total > 0 ? (double(p.bytes_sent) + double(p.bytes_recv)) / total : -1.0;
}

std::string share_text(double share) {
    if (share < 0) return "-";
    char buf[16];
    snprintf(buf, sizeof(buf), "%.1f%%", share * 100.0);
    return buf;
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
