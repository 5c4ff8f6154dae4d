/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The telemetry ring's memory layout, shared by the library (writer) and vccl-telemetry (reader). One ring
 * per rank and communicator, in shared memory (/dev/shm/vccl-JOB-HASH-RANK) or private memory:
 *
 *   [Header, 1 KiB] [PathSlot x npaths, 128 B each] [PathTotals x npaths, 320 B each]
 *   [RecordSlot x capacity, 64 B each]
 *
 * One writer (the thread that drives the communicator's transport), any number of readers that attach and
 * detach at any time and never write. Every slot carries a sequence word: odd while the writer changes it,
 * even when stable. Readers copy the payload and keep it only when the sequence is even and unchanged
 * across the copy (a seqlock per slot), so the writer never waits and never sees its readers.
 *
 * Ring record i (i = 0, 1, ... counted from the start) lives in slot i % capacity; its slot sequence is
 * 2*i+2 once written. Header::write_index is the number of records written. A reader that falls more than
 * `capacity` behind loses the oldest records (it can tell how many).
 *
 * Payload words are std::atomic<uint64_t> (lock-free, plain memory), accessed relaxed between the fences.
 *
 * PathTotals (the send latency histogram, failovers by cause) and the header's per-collective counters are
 * counters that only grow, written by the one writer with relaxed stores and no sequence word: a reader sees
 * each word either before or after an increment, which is all a scraper of counters needs, and the writer
 * pays one load and one store per increment.
 */
#ifndef VCCL_TELEMETRY_FORMAT_H_
#define VCCL_TELEMETRY_FORMAT_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace vccl {
namespace telemetry {

constexpr uint64_t kMagic = 0x314c45544c434356ull; // "VCCLTEL1" little endian
/* 2: a third path per peer (kDevicePath). 3: PathTotals after the path slots, per-collective counters in
 * the header. Readers accept exactly kVersion: a ring of another layout is refused by name, never misread.
 * Header::paths_described and what it guards came later within version 3: they sit in header space that
 * earlier writers left zero, which reads as "not described". */
constexpr uint32_t kVersion = 3;
constexpr int kMaxPathsPerPeer = 3; // primary and backup (the host transport), and the device path
/* Path index of the transfers between GPUs of one host that never touch the host transport: copy-engine
 * transfers into a peer's mapped buffer, the staging FIFO, and the low-latency and chunked kernels
 * (telemetry/device_flows.h). */
constexpr int kDevicePath = 2;
constexpr size_t kHeaderBytes = 1024;
constexpr size_t kPathDeviceChars = 64; // Header::path_devices: a UCX_NET_DEVICES list, NUL-terminated, cut to fit

enum class Dir : uint8_t { Send = 0, Recv = 1 };
enum class RecordKind : uint8_t { Transfer = 0, PathEvent = 1 };
/* Path states, as vcclTelemetryPeer::state reports them. */
enum class PathState : uint32_t { Up = 0, Down = 1, Standby = 2, Unused = 3 };

/* The collective a transfer belongs to: 0 for point-to-point, else 1 + the library's CollType value. */
struct TransferTag {
    uint8_t coll = 0;
    uint64_t seq = 0; // the communicator's collective sequence number (0 for point-to-point)
};

constexpr int kCollKinds = 7; // TransferTag::coll values: p2p and the six collectives

const char* coll_kind_name(uint8_t coll);      // "p2p", "allreduce", ...
const char* path_state_name(uint32_t state);   // "up", "down", "standby", "unused"

/* One ring record: a completed (or failed) transfer, or a path event. 56 bytes of payload. */
struct Record {
    uint64_t post_ns;       // monotonic ns (CLOCK_MONOTONIC) when posted; event time for path events
    uint64_t done_ns;       // when completion was observed (0 for events)
    uint64_t bytes;
    uint64_t coll_seq;      // TransferTag::seq
    double window_bw;       // bytes/s of this path and direction after this completion
    int32_t peer;
    uint8_t path;
    uint8_t dir;            // Dir
    uint8_t coll;           // TransferTag::coll
    uint8_t kind;           // RecordKind
    uint32_t outstanding;   // requests still outstanding on the path after this record
    uint32_t status;        // 0 ok, 1 failed (transfers); new PathState (events)
};
static_assert(sizeof(Record) == 56, "Record is 7 words");

/* Per-path counters, rewritten by the writer on every post and completion. */
struct PathStats {
    int32_t peer;
    int32_t path;
    uint32_t state;              // PathState
    uint32_t used;               // 1 once the path carried traffic or had an event
    uint64_t bytes_sent;
    uint64_t bytes_recv;
    uint64_t send_completions;
    uint64_t recv_completions;
    double send_bw;              // window bandwidth, bytes/s
    double recv_bw;
    uint64_t outstanding_reqs;
    uint64_t outstanding_bytes;
    uint64_t last_done_ns;
    uint64_t failures;
    uint64_t last_event_ns;
    uint64_t events;             // path state changes so far (failover switches, failbacks, losses)
    uint64_t reserved[1];
};
static_assert(sizeof(PathStats) == 120, "PathStats is 15 words");

/* Send latency (post to completion) buckets: bucket 0 holds latencies under 2^kLatencyShift ns (1.024 us),
 * bucket i (1 .. kLatencyBuckets-2) those in [2^(kLatencyShift+i-1), 2^(kLatencyShift+i)) ns, the last one
 * everything from 2^(kLatencyShift+kLatencyBuckets-2) ns (17.2 s) on. Powers of two: the bucket is a count of
 * leading zeros, no division or table on the writer's path. Only sends are counted: a receive's post to
 * completion also holds the time its peer took to post. */
constexpr int kLatencyShift = 10;
constexpr int kLatencyBuckets = 26;
inline int latency_bucket(uint64_t ns) {
    uint64_t v = ns >> kLatencyShift;
    if (v == 0) return 0;
    int b = 64 - __builtin_clzll(v);
    return b < kLatencyBuckets - 1 ? b : kLatencyBuckets - 1;
}
/* Upper bound of bucket i in ns (exclusive); the last bucket has none (UINT64_MAX). */
inline uint64_t latency_bucket_upper_ns(int i) {
    return i >= kLatencyBuckets - 1 ? UINT64_MAX : uint64_t(1) << (kLatencyShift + i);
}

/* Why traffic left a path (failover_transport.h's causes, grouped). */
enum class SwitchCause : uint8_t {
    LinkDown = 0,    // the port or netdev went down (verbs or netlink event)
    Timeout = 1,     // silence: acknowledgements, data or RESUME missing for the failover timeout
    Error = 2,       // the transport reported an error on the path
    Peer = 3,        // the peer switched (it saw the failure first)
    Unreachable = 4, // every path to the peer failed
    Other = 5,
};
constexpr int kSwitchCauses = 6;
const char* switch_cause_name(int cause); // "link_down", "timeout", "error", "peer", "unreachable", "other"

/* Per path totals since the ring was created (see above: counters, no sequence word). */
struct alignas(64) PathTotals {
    std::atomic<uint64_t> latency[kLatencyBuckets]; // timed sends per latency_bucket()
    std::atomic<uint64_t> latency_sum_ns;           // their latencies summed
    std::atomic<uint64_t> failovers[kSwitchCauses]; // traffic left this path, by SwitchCause
    std::atomic<uint64_t> failbacks;                // traffic came back to this path (the primary) once healed
    std::atomic<uint64_t> reserved[6];
};
static_assert(sizeof(PathTotals) == 320, "PathTotals is 40 words");

/* Per collective kind (TransferTag::coll) on this rank: the host collectives the communicator ran. */
struct CollTotals {
    std::atomic<uint64_t> calls;
    std::atomic<uint64_t> bytes;   // the caller's bytes: count * datatype size (send side)
    std::atomic<uint64_t> time_ns; // from the start of the algorithm to its end on this rank
};

/* A counter's increment by its one writer: a relaxed load and store, no read-modify-write (no lock prefix). */
inline void counter_add(std::atomic<uint64_t>& c, uint64_t v) {
    c.store(c.load(std::memory_order_relaxed) + v, std::memory_order_relaxed);
}

struct alignas(64) RecordSlot {
    std::atomic<uint64_t> seq;
    std::atomic<uint64_t> w[7];
};
struct alignas(128) PathSlot {
    std::atomic<uint64_t> seq;
    std::atomic<uint64_t> w[15];
};
static_assert(sizeof(RecordSlot) == 64 && sizeof(PathSlot) == 128, "slot sizes");

struct Header {
    uint64_t magic;
    uint32_t version;
    uint32_t header_bytes;
    uint32_t record_bytes;     // sizeof(RecordSlot)
    uint32_t path_bytes;       // sizeof(PathSlot)
    uint32_t capacity;         // record slots
    uint32_t npaths;           // path slots: nranks * kMaxPathsPerPeer (slot = peer * kMaxPathsPerPeer + path)
    int32_t rank;
    int32_t nranks;
    int32_t pid;
    uint32_t window;           // VCCL_TELEMETRY_WINDOW
    uint64_t comm_hash;
    int64_t mono_to_wall_ns;   // add to a monotonic time to get Unix-epoch ns (sampled at creation)
    char comm_name[64];
    char job[64];
    char host[64];
    alignas(64) std::atomic<uint64_t> write_index; // records written so far
    std::atomic<uint64_t> heartbeat_ns;            // last writer activity (monotonic)
    std::atomic<uint32_t> closed;                  // 1 once the communicator is destroyed
    alignas(64) CollTotals colls[kCollKinds];      // by TransferTag::coll
    /* How the host paths are laid out, written once before the first transfer, then paths_described is set
     * to 1 (release); readers look at the rest only after reading 1 (acquire). */
    alignas(64) std::atomic<uint32_t> paths_described;
    uint32_t multipath;                            // 0 standby (primary + backup), 1 spray (both carry chunks)
    char path_devices[kMaxPathsPerPeer][kPathDeviceChars]; // network devices of each path (the rail), "" unknown
};
static_assert(sizeof(Header) <= kHeaderBytes, "header fits");

inline size_t ring_bytes(uint32_t npaths, uint32_t capacity) {
    return kHeaderBytes + size_t(npaths) * (sizeof(PathSlot) + sizeof(PathTotals)) + size_t(capacity) * sizeof(RecordSlot);
}
inline PathSlot* path_slots(void* base) { return reinterpret_cast<PathSlot*>(static_cast<char*>(base) + kHeaderBytes); }
inline PathTotals* path_totals(void* base, uint32_t npaths) {
    return reinterpret_cast<PathTotals*>(static_cast<char*>(base) + kHeaderBytes + size_t(npaths) * sizeof(PathSlot));
}
inline RecordSlot* record_slots(void* base, uint32_t npaths) {
    return reinterpret_cast<RecordSlot*>(static_cast<char*>(base) + kHeaderBytes +
                                         size_t(npaths) * (sizeof(PathSlot) + sizeof(PathTotals)));
}

/* Seqlock write and read of N payload words. */
template <int N>
inline void slot_write(std::atomic<uint64_t>& seq, std::atomic<uint64_t>* w, const void* payload, uint64_t stable_seq) {
    uint64_t words[N];
    memcpy(words, payload, sizeof(words));
    seq.store(stable_seq - 1, std::memory_order_relaxed); // odd: being written
    std::atomic_thread_fence(std::memory_order_release);
    for (int i = 0; i < N; ++i) w[i].store(words[i], std::memory_order_relaxed);
    seq.store(stable_seq, std::memory_order_release);
}

/* Returns the stable sequence the copy belongs to, or 0 when the slot was being written (retry or skip). */
template <int N>
inline uint64_t slot_read(const std::atomic<uint64_t>& seq, const std::atomic<uint64_t>* w, void* payload) {
    uint64_t s1 = seq.load(std::memory_order_acquire);
    if (s1 == 0 || (s1 & 1)) return 0;
    uint64_t words[N];
    for (int i = 0; i < N; ++i) words[i] = w[i].load(std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_acquire);
    if (seq.load(std::memory_order_relaxed) != s1) return 0;
    memcpy(payload, words, sizeof(words));
    return s1;
}

} // namespace telemetry
} // namespace vccl

#endif
