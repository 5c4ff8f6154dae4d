/* SPDX-License-Identifier: BSD-3-Clause */
/* Flow telemetry: per-path state, ring publication, path events. Files are in files.cc. */
#include "telemetry/telemetry.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>

#include "core/env.h"
#include "core/log.h"
#include "core/status.h"
#include "core/test_point.h"

namespace vccl {
namespace telemetry {

Options Options::from_env(int rank, int nranks, uint64_t comm_hash, const std::string& comm_name) {
    Options o;
    o.rank = rank;
    o.nranks = nranks;
    o.comm_hash = comm_hash;
    o.comm_name = comm_name;
    int64_t w = env::get_int(env::kTelemetryWindow);
    o.window = int(w < 1 ? 1 : w > 1024 ? 1024 : w);
    int64_t n = env::get_int(env::kTelemetryRing);
    o.ring_records = uint32_t(n < 16 ? 16 : n > (1 << 24) ? (1 << 24) : n);
    o.shm = env::get_bool(env::kTelemetryShm);
    o.job = job_name();
    o.dir = env::get_str(env::kTelemetryDir);
    int64_t sample = env::get_int(env::kTelemetrySample);
    o.sample = int(sample < 1 ? 1 : sample > 1000000 ? 1000000 : sample);
    int64_t f = env::get_int(env::kTelemetryFlushMs);
    o.flush_ms = int(f < 10 ? 10 : f > 3600000 ? 3600000 : f);
    return o;
}

std::string job_name() {
    std::string raw = env::get_str(env::kTelemetryJob);
    if (raw.empty()) raw = env::launcher_job_id(); // Slurm, Open MPI 4 (ORTE), Open MPI 5 / PMIx
    std::string out;
    for (char c : raw) {
        if (out.size() >= 40) break;
        out += (isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_') ? c : '_';
    }
    if (out.empty()) out = "u" + std::to_string(getuid());
    return out;
}

std::string ring_name(const std::string& job, uint64_t comm_hash, int rank) {
    char buf[160];
    snprintf(buf, sizeof(buf), "vccl-%s-%016llx-%d", job.c_str(), (unsigned long long)comm_hash, rank);
    return buf;
}

vcclResult_t Telemetry::create(const Options& options, std::unique_ptr<Telemetry>* out) {
    std::unique_ptr<Telemetry> t(new Telemetry(options));
    VCCL_RETURN_IF_ERROR(t->init());
    *out = std::move(t);
    return vcclSuccess;
}

vcclResult_t Telemetry::init() {
    RingInfo info;
    info.rank = options_.rank;
    info.nranks = options_.nranks;
    info.comm_hash = options_.comm_hash;
    info.comm_name = options_.comm_name;
    info.job = options_.job;
    info.capacity = options_.ring_records;
    info.window = uint32_t(options_.window);
    std::string name = ring_name(options_.job, options_.comm_hash, options_.rank);
    bool shared = false;
    if (options_.shm) {
        shared = ring_.create(info, "/" + name) == vcclSuccess;
        if (!shared) {
            VCCL_WARN(kLogInit, "%s; telemetry stays private to the process (vccl-telemetry top will not see it)",
                      vcclGetLastError(nullptr));
        }
    }
    if (!shared) VCCL_RETURN_IF_ERROR(ring_.create(info, ""));
    paths_.resize(size_t(options_.nranks) * kMaxPathsPerPeer);
    if (!options_.dir.empty()) {
        // A directory this rank cannot write to costs its files, not the job: failing here failed the
        // communicator's creation on every rank (the others waited for this one).
        if (open_files() == vcclSuccess) {
            flusher_ = std::thread([this] { flusher_main(); });
        } else {
            VCCL_WARN(kLogInit, "%s; rank %d writes no telemetry files (its ring and vcclCommGetTelemetry still work)",
                      vcclGetLastError(nullptr), options_.rank);
        }
    }
    VCCL_INFO(kLogInit, "telemetry: rank %d window %d, ring of %u records %s%s%s", options_.rank, options_.window,
              options_.ring_records, ring_.shm_name().empty() ? "in private memory" : "in /dev/shm",
              ring_.shm_name().c_str(), csv_fd_ < 0 ? "" : ", files in VCCL_TELEMETRY_DIR");
    return vcclSuccess;
}

Telemetry::~Telemetry() {
    if (flusher_.joinable()) {
        {
            std::lock_guard<std::mutex> lock(stop_mutex_);
            stop_ = true;
        }
        stop_cv_.notify_all();
        flusher_.join();
    }
    ring_.mark_closed();
    flush_files();
    std::lock_guard<std::mutex> lock(files_mutex_);
    if (csv_fd_ >= 0) close(csv_fd_);
    if (jsonl_fd_ >= 0) close(jsonl_fd_);
    csv_fd_ = jsonl_fd_ = -1;
}

std::string Telemetry::shm_path() const {
    return ring_.shm_name().empty() ? std::string() : "/dev/shm" + ring_.shm_name();
}

Telemetry::PathW* Telemetry::make_path(int peer, int path) {
    size_t slot = size_t(peer) * kMaxPathsPerPeer + size_t(path);
    paths_[slot].reset(new PathW(options_.window));
    PathStats& s = paths_[slot]->stats;
    memset(&s, 0, sizeof(s));
    s.peer = peer;
    s.path = path;
    s.state = uint32_t(PathState::Up);
    s.used = 1;
    paths_[slot]->totals = ring_.totals(slot);
    return paths_[slot].get();
}

void Telemetry::complete_timed(PathW* p, Dir dir, uint64_t bytes, uint64_t post_ns, const TransferTag& tag,
                               bool ok, uint64_t done_ns) {
    PathStats& s = p->stats;
    uint64_t done = done_ns != 0 ? done_ns : clock_.now_ns();
    // A test stretches the recorded times of the sends on one primary path, as a link that many times slower would
    // show them (the factor it sets applies from the next completion on).
    if (vccl_test_point != nullptr && s.path == 0) {
        p->slow_factor = double(test_point(options_.test_key, TestPoint::SlowLinkMilli, s.peer)) / 1000.0;
    }
    if (p->slow_factor > 1.0 && dir == Dir::Send && ok) {
        // A virtual link `slow_factor` times slower: each send's busy time (as the window counts it) is
        // stretched and queued behind the previous stretched send.
        uint64_t real_start = post_ns > p->slow_real_done ? post_ns : p->slow_real_done;
        uint64_t virt_start = post_ns > p->slow_virt_done ? post_ns : p->slow_virt_done;
        p->slow_real_done = done;
        done = virt_start + uint64_t(double(done > real_start ? done - real_start : 0) * p->slow_factor);
        p->slow_virt_done = done;
    }
    // A completion seen earlier and recorded now (done_ns) publishes at the present time, never back in time.
    const uint64_t publish_at = done_ns != 0 ? std::max(done, clock_.now_ns()) : done;
    Record r;
    r.post_ns = post_ns;
    r.done_ns = done;
    r.bytes = bytes;
    r.coll_seq = tag.seq;
    r.peer = int(s.peer);
    r.path = uint8_t(s.path);
    r.dir = uint8_t(dir);
    r.coll = tag.coll;
    r.kind = uint8_t(RecordKind::Transfer);
    r.status = ok ? 0 : 1;
    if (ok) {
        Window& w = dir == Dir::Send ? p->tx : p->rx;
        w.add(post_ns, done, bytes);
        (dir == Dir::Send ? s.send_bw : s.recv_bw) = w.bandwidth();
        s.last_done_ns = std::max(s.last_done_ns, done);
        if (dir == Dir::Send) {
            const uint64_t latency = done > post_ns ? done - post_ns : 0;
            counter_add(p->totals->latency[latency_bucket(latency)], 1);
            counter_add(p->totals->latency_sum_ns, latency);
        }
    }
    r.window_bw = dir == Dir::Send ? s.send_bw : s.recv_bw;
    r.outstanding = uint32_t(s.outstanding_reqs);
    publish_soon(*p, publish_at);
    ring_.append(r);
}

void Telemetry::publish_held_at(uint64_t now) {
    held_published_ns_ = now;
    for (size_t slot : held_) {
        PathW* p = paths_[slot].get();
        if (p != nullptr && p->held) publish(*p, now);
    }
    held_.clear();
    ring_.heartbeat(now);
}

void Telemetry::path_event(int peer, int path, PathState state) {
    PathW* p = path_w(peer, path);
    if (p == nullptr) return;
    uint64_t now = clock_.now_ns();
    p->stats.state = uint32_t(state);
    p->stats.last_event_ns = now;
    p->stats.events++;
    publish(*p, now); // events are rare and readers want them at once
    Record r;
    memset(&r, 0, sizeof(r));
    r.post_ns = now;
    r.peer = peer;
    r.path = uint8_t(path);
    r.kind = uint8_t(RecordKind::PathEvent);
    r.status = uint32_t(state);
    r.outstanding = uint32_t(p->stats.outstanding_reqs);
    ring_.append(r);
    VCCL_INFO(kLogNet, "telemetry: rank %d path %d to rank %d is %s", options_.rank, path, peer,
              path_state_name(uint32_t(state)));
}

void Telemetry::path_switch(int peer, int from, int to, SwitchCause cause, bool failback) {
    PathW* left = path_w(peer, from);
    PathW* now_on = path_w(peer, to);
    if (left == nullptr || now_on == nullptr) return;
    // The counters first: a reader that sees the new state also sees the switch counted.
    if (failback) {
        counter_add(now_on->totals->failbacks, 1);
    } else {
        counter_add(left->totals->failovers[int(cause) < kSwitchCauses ? int(cause) : kSwitchCauses - 1], 1);
    }
    path_event(peer, from, to == 0 ? PathState::Standby : PathState::Down);
    path_event(peer, to, PathState::Up);
}

void Telemetry::count_failover(int peer, int path, SwitchCause cause) {
    PathW* p = path_w(peer, path);
    if (p != nullptr) counter_add(p->totals->failovers[int(cause) < kSwitchCauses ? int(cause) : kSwitchCauses - 1], 1);
}

std::vector<PathStats> Telemetry::snapshot() const {
    RingReader reader;
    if (!reader.attach_memory(ring_.base(), nullptr)) return {};
    return reader.paths();
}

} // namespace telemetry
} // namespace vccl

namespace vccl {
namespace telemetry {

PathTotalsCopy Telemetry::totals(int peer, int path) const {
    RingReader reader;
    if (!reader.attach_memory(ring_.base(), nullptr)) return PathTotalsCopy();
    return reader.totals(peer, path);
}

} // namespace telemetry
} // namespace vccl
