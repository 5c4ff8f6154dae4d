/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The telemetry ring (layout in format.h): RingWriter creates and fills one, RingReader attaches to one by
 * path (a tool, a test, the file flusher) and copies out consistent records and path counters.
 */
#ifndef VCCL_TELEMETRY_RING_H_
#define VCCL_TELEMETRY_RING_H_

#include <cstdint>
#include <string>
#include <vector>

#include "telemetry/format.h"
#include "vccl.h"

namespace vccl {
namespace telemetry {

/* Plain copies of the counters of format.h's PathTotals and CollTotals. */
struct PathTotalsCopy {
    uint64_t latency[kLatencyBuckets] = {};
    uint64_t latency_sum_ns = 0;
    uint64_t failovers[kSwitchCauses] = {};
    uint64_t failbacks = 0;
    uint64_t latency_count() const {
        uint64_t n = 0;
        for (uint64_t c : latency) n += c;
        return n;
    }
    void add(const PathTotalsCopy& o) {
        for (int i = 0; i < kLatencyBuckets; ++i) latency[i] += o.latency[i];
        latency_sum_ns += o.latency_sum_ns;
        for (int i = 0; i < kSwitchCauses; ++i) failovers[i] += o.failovers[i];
        failbacks += o.failbacks;
    }
};
struct CollTotalsCopy {
    uint64_t calls = 0, bytes = 0, time_ns = 0;
};

struct RingInfo {
    int rank = 0;
    int nranks = 1;
    uint64_t comm_hash = 0;
    std::string comm_name;
    std::string job;
    uint32_t capacity = 4096;
    uint32_t window = 8;
};

class RingWriter {
public:
    RingWriter() = default;
    ~RingWriter();
    RingWriter(const RingWriter&) = delete;
    RingWriter& operator=(const RingWriter&) = delete;

    /* shm_name empty: private memory. Otherwise shm_open(shm_name, O_CREAT|O_EXCL, 0600), unlinked by
     * the destructor. */
    vcclResult_t create(const RingInfo& info, const std::string& shm_name);

    void append(const Record& r) {
        uint64_t i = index_++;
        RecordSlot& s = records_[slot_index(i)];
        slot_write<7>(s.seq, s.w, &r, 2 * i + 2);
        header_->write_index.store(index_, std::memory_order_release);
    }
    void publish_path(int slot, const PathStats& stats) {
        PathSlot& s = paths_[slot];
        path_seq_[size_t(slot)] += 2;
        slot_write<15>(s.seq, s.w, &stats, path_seq_[size_t(slot)]);
    }
    /* Path slot `slot`'s totals (send latency histogram, failovers); counters, see format.h. */
    PathTotals* totals(size_t slot) const { return totals_ + slot; }
    CollTotals* colls() const { return header_->colls; }
    void heartbeat(uint64_t now) { header_->heartbeat_ns.store(now, std::memory_order_relaxed); }
    void mark_closed() { header_->closed.store(1, std::memory_order_release); }
    /* Header::multipath and path_devices (devices[0 .. kMaxPathsPerPeer-1], cut to fit), then paths_described.
     * Once, before the first transfer. */
    void describe_paths(const std::string* devices, bool spray);

    Header* header() const { return header_; }
    void* base() const { return base_; }
    const std::string& shm_name() const { return shm_name_; }
    uint32_t npaths() const { return npaths_; }

private:
    void* base_ = nullptr;
    size_t bytes_ = 0;
    bool shared_ = false;
    std::string shm_name_;
    Header* header_ = nullptr;
    PathSlot* paths_ = nullptr;
    PathTotals* totals_ = nullptr;
    RecordSlot* records_ = nullptr;
    uint32_t capacity_ = 0;
    uint32_t npaths_ = 0;
    uint64_t index_ = 0;
    uint64_t capacity_mask_ = 0; // capacity_ - 1 when a power of two (the default): no division per record
    std::vector<uint64_t> path_seq_;
    size_t slot_index(uint64_t i) const { return size_t(capacity_mask_ != 0 ? i & capacity_mask_ : i % capacity_); }
};

class RingReader {
public:
    RingReader() = default;
    ~RingReader() { detach(); }
    RingReader(const RingReader&) = delete;
    RingReader& operator=(const RingReader&) = delete;

    /* Maps a ring file read-only (e.g. /dev/shm/vccl-...); false with *why on failure (not a ring, another
     * version, too small, inconsistent sizes). Never reads past the file's size as it was when mapped (a
     * file truncated later raises SIGBUS on access: vccl-telemetry serve guards its reads). */
    bool attach(const std::string& path, std::string* why);
    /* Reads a ring in this process's memory (no mapping). */
    bool attach_memory(const void* base, std::string* why);
    void detach();
    bool attached() const { return header_ != nullptr; }

    const Header& header() const { return *header_; }
    uint64_t write_index() const { return header_->write_index.load(std::memory_order_acquire); }
    /* Every path slot that is in use, consistently copied. */
    std::vector<PathStats> paths() const;
    /* Path slot `slot` (0 .. npaths-1) consistently copied; false when out of range, never written, not in
     * use, or still changing after many tries. `writer_gone` (its process has ended): a slot the writer left
     * half-written is copied as it stands. Allocates nothing. */
    bool path(uint32_t slot, PathStats* out, bool writer_gone = false) const;
    /* The totals of path `path` to `peer` (zero for indexes out of range). */
    PathTotalsCopy totals(int peer, int path) const;
    /* The counters of collective kind `coll` (TransferTag::coll; zero out of range). */
    CollTotalsCopy coll_totals(int coll) const;
    /* Records from *next on (the first call may start at 0); returns them in order, advances *next, and
     * adds to *lost the records overwritten before they could be read. */
    std::vector<Record> read(uint64_t* next, uint64_t* lost) const;

private:
    bool validate(size_t bytes, std::string* why);
    void* map_ = nullptr;
    size_t map_bytes_ = 0;
    const Header* header_ = nullptr;
    const PathSlot* paths_ = nullptr;
    const PathTotals* totals_ = nullptr;
    const RecordSlot* records_ = nullptr;
};

} // namespace telemetry
} // namespace vccl

#endif
