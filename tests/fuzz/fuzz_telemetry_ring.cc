/* SPDX-License-Identifier: BSD-3-Clause */
// libFuzzer target: the telemetry ring reader (telemetry/ring.h) and vccl-telemetry's copy and exposition of
// a ring (tools/telemetry/rings.h, metrics.h), on a file of the input's bytes: rings live in /dev/shm, where any
// process of the user can write anything. Each input is read as given, then again with the header's fixed
// fields (magic, version, sizes) and its counts made consistent and the file sized to match, so that the
// fuzzer reaches the path slots, totals and records behind the checks. Reading must never crash or read out
// of bounds; a ring that is accepted must render to text.
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "telemetry/ring.h"
#include "tools/telemetry/metrics.h"

using namespace vccl::telemetry;

namespace {

void read_all(const std::vector<uint8_t>& bytes) {
    int fd = memfd_create("vccl-fuzz-ring", MFD_CLOEXEC);
    if (fd < 0) return;
    if (!bytes.empty() && write(fd, bytes.data(), bytes.size()) != ssize_t(bytes.size())) {
        close(fd);
        return;
    }
    const std::string path = "/proc/self/fd/" + std::to_string(fd);
    RingReader reader;
    std::string why;
    if (reader.attach(path, &why)) {
        std::vector<PathStats> paths = reader.paths();
        for (const PathStats& s : paths) {
            PathTotalsCopy t = reader.totals(s.peer, s.path);
            (void)t.latency_count();
        }
        for (int c = -1; c <= kCollKinds; ++c) (void)reader.coll_totals(c);
        uint64_t next = 0, lost = 0;
        (void)reader.read(&next, &lost);
        next = UINT64_MAX / 2;
        (void)reader.read(&next, &lost);
    } else if (why.empty()) {
        abort(); // a refusal always says why
    }
    vtel::RingView view;
    if (vtel::read_ring_file(path, &view, &why)) {
        vtel::ScrapeInput in;
        in.rings.push_back(view);
        vtel::MetricsOptions o;
        o.max_peers = 2;
        std::string text = vtel::render_metrics(in, o, 0);
        if (text.empty()) abort();
    }
    close(fd);
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    std::vector<uint8_t> bytes(data, data + size);
    read_all(bytes);
    if (size > 64 * 1024) return 0;
    // Past the checks: fixed fields right, counts small and consistent, the file as long as they say.
    if (bytes.size() < kHeaderBytes) bytes.resize(kHeaderBytes, 0);
    Header h;
    memcpy(static_cast<void*>(&h), bytes.data(), sizeof(h));
    h.magic = kMagic;
    h.version = kVersion;
    h.header_bytes = uint32_t(kHeaderBytes);
    h.record_bytes = sizeof(RecordSlot);
    h.path_bytes = sizeof(PathSlot);
    h.nranks = 1 + int32_t(uint32_t(h.nranks) % 8);
    h.rank = int32_t(uint32_t(h.rank) % uint32_t(h.nranks));
    h.npaths = uint32_t(h.nranks) * kMaxPathsPerPeer;
    h.capacity = 16 + h.capacity % 48;
    memcpy(bytes.data(), static_cast<const void*>(&h), sizeof(h));
    bytes.resize(ring_bytes(h.npaths, h.capacity), 0);
    read_all(bytes);
    return 0;
}
