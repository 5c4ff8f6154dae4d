/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * VCCL_TELEMETRY_DIR: each rank appends its ring's records to DIR/vccl-JOB-HASH-RANK.csv and .jsonl. The
 * flusher thread is just another ring reader: it never slows the data path, and records the ring
 * overwrote before it got to them are counted ("dropped") instead of blocking the writer. Times in the
 * files are Unix-epoch nanoseconds (monotonic times plus the offset sampled when the ring was created, so
 * durations stay exact).
 */
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <string>

#include "core/log.h"
#include "core/status.h"
#include "telemetry/telemetry.h"

namespace vccl {
namespace telemetry {

namespace {

bool write_all(int fd, const std::string& s) {
    size_t off = 0;
    while (off < s.size()) {
        ssize_t n = write(fd, s.data() + off, s.size() - off);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return false;
        off += size_t(n);
    }
    return true;
}

int open_0600(const std::string& path) {
    int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd >= 0) fchmod(fd, 0600);
    return fd;
}

std::string json_escape(const char* s) {
    std::string out;
    for (; *s; ++s) {
        if (*s == '"' || *s == '\\') out += '\\';
        if (static_cast<unsigned char>(*s) >= 0x20) out += *s;
    }
    return out;
}

} // namespace

vcclResult_t Telemetry::open_files() {
    std::string base = options_.dir + "/" + ring_name(options_.job, options_.comm_hash, options_.rank);
    csv_fd_ = open_0600(base + ".csv");
    if (csv_fd_ < 0) {
        return set_last_error(vcclSystemError, "VCCL_TELEMETRY_DIR: cannot create %s.csv: %s", base.c_str(),
                              strerror(errno));
    }
    jsonl_fd_ = open_0600(base + ".jsonl");
    if (jsonl_fd_ < 0) {
        int e = errno;
        close(csv_fd_);
        csv_fd_ = -1;
        return set_last_error(vcclSystemError, "VCCL_TELEMETRY_DIR: cannot create %s.jsonl: %s", base.c_str(),
                              strerror(e));
    }
    const Header& h = *ring_.header();
    char buf[1024];
    snprintf(buf, sizeof(buf),
             "# vccl-telemetry 1 job=%s comm=%016" PRIx64 " name=%s rank=%d nranks=%d host=%s window=%u "
             "mono_to_wall_ns=%" PRId64 "\n"
             "type,rank,peer,path,dir,bytes,post_ns,done_ns,coll,seq,status,window_bw,outstanding\n",
             h.job, h.comm_hash, h.comm_name, h.rank, h.nranks, h.host, h.window, h.mono_to_wall_ns);
    bool ok = write_all(csv_fd_, buf);
    snprintf(buf, sizeof(buf),
             "{\"type\":\"meta\",\"version\":1,\"job\":\"%s\",\"comm\":\"%016" PRIx64 "\",\"name\":\"%s\",\"rank\":%d,"
             "\"nranks\":%d,\"host\":\"%s\",\"window\":%u,\"mono_to_wall_ns\":%" PRId64 "}\n",
             json_escape(h.job).c_str(), h.comm_hash, json_escape(h.comm_name).c_str(), h.rank, h.nranks,
             json_escape(h.host).c_str(), h.window, h.mono_to_wall_ns);
    ok = write_all(jsonl_fd_, buf) && ok;
    if (!ok) VCCL_WARN(kLogInit, "VCCL_TELEMETRY_DIR: writing %s.* failed: %s", base.c_str(), strerror(errno));
    return vcclSuccess;
}

void Telemetry::flush_files() {
    std::lock_guard<std::mutex> lock(files_mutex_);
    if (csv_fd_ < 0) return;
    RingReader reader;
    if (!reader.attach_memory(ring_.base(), nullptr)) return;
    uint64_t lost = 0;
    std::vector<Record> recs = reader.read(&next_record_, &lost);
    const Header& h = reader.header();
    int64_t off = h.mono_to_wall_ns;
    std::string csv, jsonl;
    csv.reserve(recs.size() * 96);
    jsonl.reserve(recs.size() * 200);
    if (lost > 0) {
        lost_records_ += lost;
        csv += "# dropped " + std::to_string(lost) + " records (ring overwrote them; raise VCCL_TELEMETRY_RING)\n";
        jsonl += "{\"type\":\"dropped\",\"count\":" + std::to_string(lost) + "}\n";
    }
    char buf[512];
    for (const Record& r : recs) {
        bool ev = r.kind == uint8_t(RecordKind::PathEvent);
        const char* dir = r.dir == uint8_t(Dir::Send) ? "send" : "recv";
        int64_t post = int64_t(r.post_ns) + off, done = r.done_ns != 0 ? int64_t(r.done_ns) + off : 0;
        snprintf(buf, sizeof(buf), "%s,%d,%d,%u,%s,%" PRIu64 ",%" PRId64 ",%" PRId64 ",%s,%" PRIu64 ",%u,%.0f,%u\n",
                 ev ? "event" : "xfer", h.rank, r.peer, r.path, dir, r.bytes, post, done, coll_kind_name(r.coll),
                 r.coll_seq, r.status, r.window_bw, r.outstanding);
        csv += buf;
        if (ev) {
            snprintf(buf, sizeof(buf),
                     "{\"type\":\"event\",\"rank\":%d,\"peer\":%d,\"path\":%u,\"time_ns\":%" PRId64
                     ",\"state\":\"%s\",\"status\":%u,\"outstanding\":%u}\n",
                     h.rank, r.peer, r.path, post, path_state_name(r.status), r.status, r.outstanding);
        } else {
            snprintf(buf, sizeof(buf),
                     "{\"type\":\"xfer\",\"rank\":%d,\"peer\":%d,\"path\":%u,\"dir\":\"%s\",\"bytes\":%" PRIu64
                     ",\"post_ns\":%" PRId64 ",\"done_ns\":%" PRId64 ",\"coll\":\"%s\",\"seq\":%" PRIu64
                     ",\"status\":%u,\"window_bw\":%.0f,\"outstanding\":%u}\n",
                     h.rank, r.peer, r.path, dir, r.bytes, post, done, coll_kind_name(r.coll), r.coll_seq, r.status,
                     r.window_bw, r.outstanding);
        }
        jsonl += buf;
    }
    if (!write_all(csv_fd_, csv) || !write_all(jsonl_fd_, jsonl)) {
        VCCL_WARN(kLogInit, "VCCL_TELEMETRY_DIR: appending records failed: %s", strerror(errno));
    }
}

void Telemetry::flusher_main() {
    // Wake often enough to drain a half-full ring; write at least every flush_ms.
    const Header* h = ring_.header();
    uint64_t last_flush = now_ns();
    uint64_t interval = uint64_t(options_.flush_ms) * 1000000ull;
    std::unique_lock<std::mutex> lock(stop_mutex_);
    while (!stop_) {
        stop_cv_.wait_for(lock, std::chrono::milliseconds(options_.flush_ms < 20 ? options_.flush_ms : 20));
        if (stop_) break;
        uint64_t pending;
        {
            std::lock_guard<std::mutex> files_lock(files_mutex_);
            pending = h->write_index.load(std::memory_order_acquire) - next_record_;
        }
        uint64_t now = now_ns();
        if (pending >= h->capacity / 2 || now - last_flush >= interval) {
            lock.unlock();
            flush_files();
            lock.lock();
            last_flush = now;
        }
    }
}

} // namespace telemetry
} // namespace vccl
