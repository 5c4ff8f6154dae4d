/* SPDX-License-Identifier: BSD-3-Clause */
/* The telemetry ring: creation in shared or private memory, and lock-free reading. */
#include "telemetry/ring.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "core/clock.h"
#include "core/status.h"

namespace vccl {
namespace telemetry {

namespace {

void copy_str(char* dst, size_t cap, const std::string& src) {
    size_t n = src.size() < cap - 1 ? src.size() : cap - 1;
    memcpy(dst, src.data(), n);
    dst[n] = '\0';
}

} // namespace

const char* coll_kind_name(uint8_t coll) {
    // 1 + CollType (algo/algo.h order): AllReduce, Broadcast, Reduce, AllGather, ReduceScatter, AlltoAll.
    static const char* const names[] = {"p2p", "allreduce", "broadcast", "reduce", "allgather", "reducescatter", "alltoall"};
    return coll < sizeof(names) / sizeof(names[0]) ? names[coll] : "coll";
}

const char* switch_cause_name(int cause) {
    static const char* const names[] = {"link_down", "timeout", "error", "peer", "unreachable", "other"};
    return cause >= 0 && cause < kSwitchCauses ? names[cause] : "other";
}

const char* path_state_name(uint32_t state) {
    switch (PathState(state)) {
    case PathState::Up: return "up";
    case PathState::Down: return "down";
    case PathState::Standby: return "standby";
    case PathState::Unused: return "unused";
    }
    return "?";
}

RingWriter::~RingWriter() {
    if (base_ == nullptr) return;
    if (shared_) {
        munmap(base_, bytes_);
        shm_unlink(shm_name_.c_str());
    } else {
        munmap(base_, bytes_);
    }
}

vcclResult_t RingWriter::create(const RingInfo& info, const std::string& shm_name) {
    capacity_ = info.capacity < 16 ? 16 : info.capacity;
    capacity_mask_ = (capacity_ & (capacity_ - 1)) == 0 ? capacity_ - 1 : 0;
    npaths_ = uint32_t(info.nranks) * kMaxPathsPerPeer;
    bytes_ = ring_bytes(npaths_, capacity_);
    void* base = MAP_FAILED;
    if (!shm_name.empty()) {
        int fd = shm_open(shm_name.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
        if (fd < 0) {
            return set_last_error(vcclSystemError, "telemetry: shm_open(%s): %s", shm_name.c_str(), strerror(errno));
        }
        fchmod(fd, 0600); // the umask cannot widen it, but be explicit
        if (ftruncate(fd, off_t(bytes_)) != 0) {
            int e = errno;
            close(fd);
            shm_unlink(shm_name.c_str());
            return set_last_error(vcclSystemError, "telemetry: sizing %s to %zu bytes: %s", shm_name.c_str(), bytes_,
                                  strerror(e));
        }
        // ftruncate reserves nothing on tmpfs: with /dev/shm full, the first store to a page not yet backed
        // killed the process with SIGBUS in the data path. Reserve every page now, and fall back if we cannot.
        int fe = posix_fallocate(fd, 0, off_t(bytes_));
        if (fe != 0) {
            close(fd);
            shm_unlink(shm_name.c_str());
            return set_last_error(vcclSystemError, "telemetry: reserving %zu bytes for %s: %s (is /dev/shm full?)",
                                  bytes_, shm_name.c_str(), strerror(fe));
        }
        base = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        int e = errno;
        close(fd);
        if (base == MAP_FAILED) {
            shm_unlink(shm_name.c_str());
            return set_last_error(vcclSystemError, "telemetry: mapping %s: %s", shm_name.c_str(), strerror(e));
        }
        shared_ = true;
        shm_name_ = shm_name;
    } else {
        base = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (base == MAP_FAILED) {
            return set_last_error(vcclSystemError, "telemetry: allocating %zu bytes: %s", bytes_, strerror(errno));
        }
    }
    base_ = base; // zero filled by ftruncate / anonymous mapping
    header_ = static_cast<Header*>(base_);
    paths_ = path_slots(base_);
    totals_ = path_totals(base_, npaths_);
    records_ = record_slots(base_, npaths_);
    path_seq_.assign(npaths_, 0);

    Header* h = header_;
    h->version = kVersion;
    h->header_bytes = uint32_t(kHeaderBytes);
    h->record_bytes = sizeof(RecordSlot);
    h->path_bytes = sizeof(PathSlot);
    h->capacity = capacity_;
    h->npaths = npaths_;
    h->rank = info.rank;
    h->nranks = info.nranks;
    h->pid = int32_t(getpid());
    h->window = info.window;
    h->comm_hash = info.comm_hash;
    struct timespec wall;
    clock_gettime(CLOCK_REALTIME, &wall);
    uint64_t mono = now_ns();
    h->mono_to_wall_ns = int64_t(uint64_t(wall.tv_sec) * 1000000000ull + uint64_t(wall.tv_nsec)) - int64_t(mono);
    copy_str(h->comm_name, sizeof(h->comm_name), info.comm_name);
    copy_str(h->job, sizeof(h->job), info.job);
    char host[64] = {};
    gethostname(host, sizeof(host) - 1);
    copy_str(h->host, sizeof(h->host), host);
    h->heartbeat_ns.store(mono, std::memory_order_relaxed);
    // Readers check the magic last: a ring becomes valid only once its header is complete.
    std::atomic_thread_fence(std::memory_order_release);
    reinterpret_cast<std::atomic<uint64_t>*>(&h->magic)->store(kMagic, std::memory_order_release);
    return vcclSuccess;
}

bool RingReader::validate(size_t bytes, std::string* why) {
    auto fail = [&](const char* what) {
        if (why != nullptr) *why = what;
        detach();
        return false;
    };
    const Header* h = header_;
    if (bytes < kHeaderBytes) return fail("too small for a telemetry ring");
    if (reinterpret_cast<const std::atomic<uint64_t>*>(&h->magic)->load(std::memory_order_acquire) != kMagic) {
        return fail("not a vccl telemetry ring (bad magic, or still being created)");
    }
    if (h->version != kVersion) {
        char text[160];
        snprintf(text, sizeof(text), "telemetry ring version %u %s than this reader's %u (use the vccl-telemetry of the "
                 "library that wrote it)", h->version, h->version > kVersion ? "is newer" : "is older", kVersion);
        if (why != nullptr) *why = text;
        detach();
        return false;
    }
    if (h->record_bytes != sizeof(RecordSlot) || h->path_bytes != sizeof(PathSlot) || h->header_bytes != kHeaderBytes) {
        return fail("telemetry ring has unexpected record sizes");
    }
    // The writer's invariants; a ring that breaks them is damaged, and reading it would index out of bounds
    // (npaths) or divide by zero (capacity).
    if (h->nranks < 1 || h->nranks > (1 << 20) || h->rank < 0 || h->rank >= h->nranks ||
        h->npaths != uint32_t(h->nranks) * kMaxPathsPerPeer || h->capacity < 16 || h->capacity > (1u << 24)) {
        return fail("telemetry ring header is inconsistent (damaged ring)");
    }
    if (bytes < ring_bytes(h->npaths, h->capacity)) return fail("telemetry ring is truncated");
    paths_ = path_slots(const_cast<Header*>(h));
    totals_ = path_totals(const_cast<Header*>(h), h->npaths);
    records_ = record_slots(const_cast<Header*>(h), h->npaths);
    return true;
}

bool RingReader::attach(const std::string& path, std::string* why) {
    detach();
    int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        if (why != nullptr) *why = strerror(errno);
        return false;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || st.st_size < off_t(kHeaderBytes)) {
        close(fd);
        if (why != nullptr) *why = "too small for a telemetry ring";
        return false;
    }
    void* base = mmap(nullptr, size_t(st.st_size), PROT_READ, MAP_SHARED, fd, 0);
    close(fd);
    if (base == MAP_FAILED) {
        if (why != nullptr) *why = strerror(errno);
        return false;
    }
    map_ = base;
    map_bytes_ = size_t(st.st_size);
    header_ = static_cast<const Header*>(base);
    return validate(map_bytes_, why);
}

bool RingReader::attach_memory(const void* base, std::string* why) {
    detach();
    header_ = static_cast<const Header*>(base);
    return validate(ring_bytes(header_->npaths, header_->capacity), why);
}

void RingWriter::describe_paths(const std::string* devices, bool spray) {
    header_->multipath = spray ? 1 : 0;
    for (int p = 0; p < kMaxPathsPerPeer; ++p) {
        size_t n = std::min(devices[p].size(), kPathDeviceChars - 1);
        memcpy(header_->path_devices[p], devices[p].data(), n);
        header_->path_devices[p][n] = '\0';
    }
    header_->paths_described.store(1, std::memory_order_release);
}

PathTotalsCopy RingReader::totals(int peer, int path) const {
    PathTotalsCopy c;
    if (header_ == nullptr || peer < 0 || path < 0 || path >= kMaxPathsPerPeer) return c;
    size_t slot = size_t(peer) * kMaxPathsPerPeer + size_t(path);
    if (slot >= header_->npaths) return c;
    const PathTotals& t = totals_[slot];
    for (int i = 0; i < kLatencyBuckets; ++i) c.latency[i] = t.latency[i].load(std::memory_order_relaxed);
    c.latency_sum_ns = t.latency_sum_ns.load(std::memory_order_relaxed);
    for (int i = 0; i < kSwitchCauses; ++i) c.failovers[i] = t.failovers[i].load(std::memory_order_relaxed);
    c.failbacks = t.failbacks.load(std::memory_order_relaxed);
    return c;
}

CollTotalsCopy RingReader::coll_totals(int coll) const {
    CollTotalsCopy c;
    if (header_ == nullptr || coll < 0 || coll >= kCollKinds) return c;
    const CollTotals& t = header_->colls[coll];
    c.calls = t.calls.load(std::memory_order_relaxed);
    c.bytes = t.bytes.load(std::memory_order_relaxed);
    c.time_ns = t.time_ns.load(std::memory_order_relaxed);
    return c;
}

void RingReader::detach() {
    if (map_ != nullptr) munmap(map_, map_bytes_);
    map_ = nullptr;
    map_bytes_ = 0;
    header_ = nullptr;
    paths_ = nullptr;
    totals_ = nullptr;
    records_ = nullptr;
}

bool RingReader::path(uint32_t i, PathStats* out, bool writer_gone) const {
    if (header_ == nullptr || i >= header_->npaths) return false;
    PathStats s;
    uint64_t got = 0;
    for (int tries = 0; tries < 1000 && got == 0; ++tries) {
        if (paths_[i].seq.load(std::memory_order_acquire) == 0) break; // never written
        got = slot_read<15>(paths_[i].seq, paths_[i].w, &s);
    }
    if (got == 0 && writer_gone && (paths_[i].seq.load(std::memory_order_acquire) & 1) != 0) {
        // Left odd by a writer that died inside the update: no one will finish it. Each word holds a value the
        // writer stored (the copy may mix that update's words with the one before), which is what counters need.
        uint64_t words[15];
        for (int w = 0; w < 15; ++w) words[w] = paths_[i].w[w].load(std::memory_order_relaxed);
        memcpy(&s, words, sizeof(s));
        got = 1;
    }
    if (got == 0 || s.used == 0) return false;
    *out = s;
    return true;
}

std::vector<PathStats> RingReader::paths() const {
    std::vector<PathStats> out;
    if (header_ == nullptr) return out;
    for (uint32_t i = 0; i < header_->npaths; ++i) {
        PathStats s;
        if (path(i, &s)) out.push_back(s);
    }
    return out;
}

std::vector<Record> RingReader::read(uint64_t* next, uint64_t* lost) const {
    std::vector<Record> out;
    if (header_ == nullptr) return out;
    uint64_t end = write_index();
    uint64_t cap = header_->capacity;
    uint64_t i = *next;
    // Past the end: not this ring's position (a ring replaced by a younger one under the same name, or a
    // damaged write index). Start again from the oldest record it still holds; end - i must not wrap.
    if (i > end) i = end > cap ? end - cap : 0;
    if (end > cap && i < end - cap) {
        if (lost != nullptr) *lost += end - cap - i;
        i = end - cap;
    }
    out.reserve(size_t(end - i));
    for (; i < end; ++i) {
        const RecordSlot& s = records_[i % cap];
        Record r;
        uint64_t got = slot_read<7>(s.seq, s.w, &r);
        if (got == 2 * i + 2) {
            out.push_back(r);
        } else if (lost != nullptr) {
            ++*lost; // overwritten by a newer record (or being overwritten) while we read
        }
    }
    *next = end;
    return out;
}

} // namespace telemetry
} // namespace vccl
