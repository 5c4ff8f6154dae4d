/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Flow telemetry of one communicator on one rank: per path (peer, path index) each transfer's post and
 * completion time, bytes, direction and collective; a sliding window over the last W completions per
 * direction (window.h) giving the current bandwidth; outstanding requests and bytes; path events.
 *
 * Data path: the transport calls on_post() and on_complete() from the one thread that drives it at a time
 * (the communicator serialises its users), so the per-path state needs no lock; every change is published
 * to the ring (ring.h) with per-slot sequence numbers, and readers (vcclCommGetTelemetry, vccl-telemetry,
 * the file flusher) never block the writer.
 *
 * Export: the ring lives in /dev/shm/vccl-JOB-HASH-RANK (mode 0600, created O_EXCL, removed at destroy)
 * unless VCCL_TELEMETRY_SHM=0; with VCCL_TELEMETRY_DIR a background thread appends the records to
 * DIR/vccl-JOB-HASH-RANK.csv and .jsonl every VCCL_TELEMETRY_FLUSH_MS and at destroy.
 */
#ifndef VCCL_TELEMETRY_TELEMETRY_H_
#define VCCL_TELEMETRY_TELEMETRY_H_

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/clock.h"
#include "telemetry/fast_clock.h"
#include "telemetry/format.h"
#include "telemetry/ring.h"
#include "telemetry/window.h"
#include "vccl.h"

namespace vccl {
namespace telemetry {

struct Options {
    int rank = 0;
    int nranks = 1;
    uint64_t comm_hash = 0;
    std::string comm_name;
    // Defaults from the environment (VCCL_TELEMETRY_*) when created with Options::from_env().
    int window = 8;
    uint32_t ring_records = 4096;
    bool shm = true;
    std::string job;
    std::string dir;
    int flush_ms = 1000;
    int sample = 64; // VCCL_TELEMETRY_SAMPLE: time one small transfer in this many (1: all)
    const void* test_key = nullptr; // the communicator, for the test points (core/test_point.h)

    static Options from_env(int rank, int nranks, uint64_t comm_hash, const std::string& comm_name);
};

/* The job name for ring and file names: VCCL_TELEMETRY_JOB, else the Slurm or Open MPI job id, else
 * u<uid>; reduced to [A-Za-z0-9._]. The one place that reads non-VCCL launcher variables. */
std::string job_name();

/* "vccl-JOB-HASH-RANK": the shm object name (without the leading /) and the files' base name. */
std::string ring_name(const std::string& job, uint64_t comm_hash, int rank);

class Telemetry {
public:
    /* *out stays NULL when VCCL_TELEMETRY=0 (from_env) — callers test the pointer. A ring that cannot be
     * shared (name taken, /dev/shm full) falls back to private memory with a warning. */
    static vcclResult_t create(const Options& options, std::unique_ptr<Telemetry>* out);
    ~Telemetry(); // final file flush, ring removed

    /* One path's counters (opaque to callers). A transport that posts many transfers on one path looks it
     * up once with path() and hands it to on_post/on_complete: the lookup was a third of the cost of a
     * counted transfer. NULL for a peer or path out of range; valid as long as this object. */
    struct PathW;
    PathW* path(int peer, int path) { return path_w(peer, path); }

    /* Hot path, writer thread only. on_post returns the post time to hand back to on_complete, or 0 when
     * the transfer is counted but not timed (sampling, below). `tag`: the collective and sequence number
     * the transfer belongs to, which sampling goes by; NULL times every transfer. `timed_from_bytes`: transfers
     * from this size on are timed whatever the sampling (UINT64_MAX: sampled at every size, as the device path
     * does, whose timing costs its stream a write to host memory; telemetry/device_flows.h). */
    uint64_t on_post(PathW* p, Dir dir, uint64_t bytes, const TransferTag* tag = nullptr,
                     uint64_t timed_from_bytes = kSampleBelowBytes) {
        p->stats.outstanding_reqs++;
        p->stats.outstanding_bytes += bytes;
        if (tag != nullptr && !sampled(*p, dir, bytes, *tag, timed_from_bytes)) {
            hold(*p);
            return 0;
        }
        uint64_t now = clock_.now_ns();
        publish_soon(*p, now);
        return now;
    }
    /* Inline up to the sampling decision: most small transfers are only counted, and the call into the
     * timed path's large frame cost as much as the counting. `done_ns`: when the transfer was seen done, on
     * now_ns()'s clock (0: now), for a completion recorded after a check that came later (telemetry/device_flows.h). */
    void on_complete(PathW* p, Dir dir, uint64_t bytes, uint64_t post_ns, const TransferTag& tag, bool ok,
                     uint64_t done_ns = 0) {
        PathStats& s = p->stats;
        if (s.outstanding_reqs > 0) s.outstanding_reqs--;
        s.outstanding_bytes = s.outstanding_bytes >= bytes ? s.outstanding_bytes - bytes : 0;
        count_completion(s, dir, bytes, ok);
        if (post_ns == 0) { // counted, not timed (sampling): no clock reading, no record, no window entry
            hold(*p);
            return;
        }
        complete_timed(p, dir, bytes, post_ns, tag, ok, done_ns);
    }
    /* vcclCommPauseTelemetry: collectives are not counted while paused (the transports stop recording). */
    void pause_collectives(bool paused) { colls_paused_ = paused; }
    /* The writer's clock (post and completion stamps). */
    uint64_t now_ns() { return clock_.now_ns(); }
    /* The same by peer and path (a lookup each). */
    uint64_t on_post(int peer, int path, Dir dir, uint64_t bytes, const TransferTag* tag = nullptr) {
        PathW* p = path_w(peer, path);
        return p != nullptr ? on_post(p, dir, bytes, tag) : 0;
    }
    void on_complete(int peer, int path, Dir dir, uint64_t bytes, uint64_t post_ns, const TransferTag& tag, bool ok) {
        PathW* p = path_w(peer, path);
        if (p != nullptr) on_complete(p, dir, bytes, post_ns, tag, ok);
    }

    /* The network devices (UCX_NET_DEVICES form, "" when the transport chose) of the primary and the backup
     * path, and whether both carry chunks (VCCL_MULTIPATH=spray): labels of the paths for readers. Once, by
     * the communicator's creation, before the first transfer. */
    void describe_paths(const std::string& primary, const std::string& backup, bool spray) {
        const std::string devices[kMaxPathsPerPeer] = {primary, backup, std::string()};
        ring_.describe_paths(devices, spray);
    }
    /* A path changed state (failover and failback call this); also recorded in the ring. */
    void path_event(int peer, int path, PathState state);
    /* Traffic to `peer` moved from path `from` to path `to`: the two state changes, and the left path's
     * failover counter for `cause` or (failback) the returned-to path's failback counter. */
    void path_switch(int peer, int from, int to, SwitchCause cause, bool failback);
    /* Counts a failover with `cause` on the path without a state change (e.g. every path of an unreachable
     * peer, whose state changes come with path_event). */
    void count_failover(int peer, int path, SwitchCause cause);

    /* Collectives of kind `coll` (TransferTag::coll) on this rank: `calls` calls with `bytes` of the callers'
     * data, and `ns` spent in host algorithms or on the GPUs. A call on host buffers adds all three when it ends; one
     * on device buffers counts when enqueued, a staged one adds each host piece's time as it ends, and of those the
     * GPUs run, one in 64 adds its device time x 64 once a later call finds it done (device/call_timer.h).
     * Writer side (the communicator's operation lock, or the staged job that owns the transport). */
    void on_collective(uint8_t coll, uint64_t calls, uint64_t bytes, uint64_t ns) {
        if (coll >= kCollKinds || colls_paused_) return;
        CollTotals& c = ring_.colls()[coll];
        counter_add(c.calls, calls);
        counter_add(c.bytes, bytes);
        counter_add(c.time_ns, ns);
    }

    /* Writer thread, while it waits (the transports call it from their idle polls): publishes per-path
     * counters held back by the publication interval, so a transfer that never completes still shows as
     * outstanding. Keeps to the interval too: small collectives wait a little on every operation, and
     * publishing on each wait cost as much as the publication interval saves. Cheap when nothing is held. */
    void tick() {
        if (held_.empty()) return;
        uint64_t now = clock_.now_ns();
        if (now - held_published_ns_ >= kPublishIntervalNs) publish_held_at(now);
    }
    /* Writer side (callers hold the communicator's operation lock): publishes everything held back, so a
     * snapshot taken next is exact. */
    void publish_held() { publish_held_at(clock_.now_ns()); }

    /* Readers, any thread. */
    std::vector<PathStats> snapshot() const;
    PathTotalsCopy totals(int peer, int path) const;
    const RingWriter& ring() const { return ring_; }
    /* /dev/shm path of the shared ring, empty when private. */
    std::string shm_path() const;
    const Options& options() const { return options_; }

    /* Appends the records not yet written to the files (no-op without VCCL_TELEMETRY_DIR). */
    void flush_files();

    struct alignas(64) PathW {
        // What counting a transfer touches comes first and fills two cache lines: stats (120 bytes), then
        // the sampling counter and the held flag. Small collectives evict these lines between operations.
        PathStats stats;
        PathTotals* totals = nullptr;   // the ring's counters of this path (latency histogram, failovers)
        uint32_t p2p_posts[2] = {0, 0}; // point-to-point posts per direction (Dir), for sampling
        bool held = false;         // changed since the last publication; listed in held_
        uint64_t published_ns = 0; // when stats last went to the ring
        uint64_t published_completions = 0; // completions (both directions) at that publication
        Window tx, rx;
        double slow_factor = 0; // test point SlowLinkMilli
        uint64_t slow_real_done = 0, slow_virt_done = 0;
        PathW(int w) : tx(w), rx(w) {}
    };

private:
    explicit Telemetry(const Options& options) : options_(options) {
        uint64_t n = uint64_t(options.sample);
        if (n > 1 && (n & (n - 1)) == 0) sample_mask_ = n - 1;
    }
    vcclResult_t init();
    PathW* path_w(int peer, int path) {
        if (unsigned(peer) >= unsigned(options_.nranks) || unsigned(path) >= unsigned(kMaxPathsPerPeer)) return nullptr;
        size_t slot = size_t(peer) * kMaxPathsPerPeer + size_t(path);
        PathW* p = paths_[slot].get();
        return p != nullptr ? p : make_path(peer, path);
    }
    PathW* make_path(int peer, int path);
    /* Writes the path's counters to the ring now (it is no longer held). */
    static size_t slot_of(const PathW& p) { return size_t(p.stats.peer) * kMaxPathsPerPeer + size_t(p.stats.path); }
    void publish(PathW& p, uint64_t now) {
        // Untimed completions read no clock; the publication's time stands for them (at most the publication
        // interval late), so lastCompletionNs does not look stalled on a path whose transfers are sampled.
        const uint64_t done = p.stats.send_completions + p.stats.recv_completions;
        if (done != p.published_completions) {
            p.published_completions = done;
            if (p.stats.last_done_ns < now) p.stats.last_done_ns = now;
        }
        ring_.publish_path(slot_of(p), p.stats);
        p.published_ns = now;
        p.held = false;
    }
    static void count_completion(PathStats& s, Dir dir, uint64_t bytes, bool ok) {
        if (!ok) {
            s.failures++;
        } else if (dir == Dir::Send) {
            s.bytes_sent += bytes;
            s.send_completions++;
        } else {
            s.bytes_recv += bytes;
            s.recv_completions++;
        }
    }
    /* on_complete of a timed transfer: clock, window, record, publication. */
    void complete_timed(PathW* p, Dir dir, uint64_t bytes, uint64_t post_ns,
                        const TransferTag& tag, bool ok, uint64_t done_ns);
    /* Per-path counters go to the ring at most once per kPublishIntervalNs per path: writing the 120-byte
     * seqlocked slot on every post and completion was most of telemetry's cost for small messages. 1 ms,
     * not 50 us as before: operations of 50 us to 1 ms (1 MiB on shared memory) published on every post
     * and completion, a third of what a 1 MiB transfer's recording cost with its lines out of cache
     * (tests/unit/bench_telemetry), and live readers refresh far less often (vccl-telemetry top: 1 s). Changes in between are held (held_) until the next publication,
     * tick() or publish_held(). The records themselves are appended on every completion. */
    static constexpr uint64_t kPublishIntervalNs = 1000000;
    void publish_soon(PathW& p, uint64_t now) {
        if (now - p.published_ns >= kPublishIntervalNs) {
            publish(p, now);
            ring_.heartbeat(now);
        } else {
            hold(p);
        }
    }
    void hold(PathW& p) {
        if (p.held) return;
        p.held = true;
        held_.push_back(slot_of(p));
    }
    /* Small transfers are timed for one collective in options_.sample (chosen by sequence number, so every
     * rank times the same collectives and vccl-telemetry report can still line them up) and one
     * point-to-point transfer in options_.sample per path and direction (counted apart: with one counter an
     * exchange that posts a receive, then a send, gave receives every even number and sends every odd one, so
     * with the default 64 no send was ever timed); the others only count. Two clock
     * readings and a record cost more than a small message takes to cross shared memory (measured: 15-20%
     * of an 8-byte allreduce when every transfer was timed). Transfers from 4 MiB on are always timed: below
     * that, timing every one cost a 1 MiB allgather on 2 ranks +1.0% (+0.3 .. +1.8%, 200 jobs on the 2-core
     * VM) against -0.1% (-0.7 .. +0.5%) sampled (docs/PERFORMANCE.md, "Telemetry cost"),
     * while the recording itself accounts for only 0.4% (tests/unit/bench_telemetry): what a 1 MiB transfer
     * evicts makes telemetry's lines cold on the critical path. From 4 MiB on a recording is under 0.2% of
     * a transfer even with cold lines. */
    static constexpr uint64_t kSampleBelowBytes = uint64_t(4) << 20;
    bool sampled(PathW& p, Dir dir, uint64_t bytes, const TransferTag& tag, uint64_t timed_from_bytes) {
        if (options_.sample <= 1 || bytes >= timed_from_bytes) return true;
        uint64_t n = tag.coll != 0 ? tag.seq : uint64_t(p.p2p_posts[dir == Dir::Send ? 0 : 1]++);
        // A mask for powers of two (the default): a 64-bit division costs as much as the rest of this path.
        return sample_mask_ != 0 ? (n & sample_mask_) == 0 : n % uint64_t(options_.sample) == 0;
    }
    vcclResult_t open_files();
    void flusher_main();

    Options options_;
    FastClock clock_; // post and completion stamps (writer thread)
    RingWriter ring_;
    std::vector<std::unique_ptr<PathW>> paths_;
    std::vector<size_t> held_; // slots whose latest counters are not published yet
    uint64_t held_published_ns_ = 0; // last publish_held_at
    uint64_t sample_mask_ = 0;       // options_.sample - 1 when that is a power of two above 1, else 0
    bool colls_paused_ = false;      // under the operation lock, as on_collective
    void publish_held_at(uint64_t now);

    // Files (VCCL_TELEMETRY_DIR): written by the flusher thread and at destroy, under files_mutex_.
    std::mutex files_mutex_;
    int csv_fd_ = -1;
    int jsonl_fd_ = -1;
    uint64_t next_record_ = 0;
    uint64_t lost_records_ = 0;
    std::thread flusher_;
    std::mutex stop_mutex_;
    std::condition_variable stop_cv_;
    bool stop_ = false;
};

/* The hook for failover code: records a path state change when telemetry is on (t may be NULL). */
inline void telemetry_path_event(Telemetry* t, int peer, int path, PathState state) {
    if (t != nullptr) t->path_event(peer, path, state);
}
inline void telemetry_path_switch(Telemetry* t, int peer, int from, int to, SwitchCause cause, bool failback) {
    if (t != nullptr) t->path_switch(peer, from, to, cause, failback);
}
inline void telemetry_count_failover(Telemetry* t, int peer, int path, SwitchCause cause) {
    if (t != nullptr) t->count_failover(peer, path, cause);
}

} // namespace telemetry
} // namespace vccl

#endif
