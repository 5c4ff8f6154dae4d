/* SPDX-License-Identifier: BSD-3-Clause */
/* The live telemetry rings of this user (/dev/shm/vccl-*), read once, and the small text helpers that
 * vccl-telemetry and vccl-diag share. One reader for both tools, so that they always agree on what a ring
 * says. */
#ifndef VCCL_TOOLS_TELEMETRY_RINGS_H_
#define VCCL_TOOLS_TELEMETRY_RINGS_H_

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "telemetry/format.h"
#include "telemetry/ring.h"

namespace vtel {

/* A consistent copy of one ring's header and path counters. */
struct RingView {
    std::string file;
    std::string job, comm_name, host;
    uint64_t comm_hash = 0;
    int rank = 0, nranks = 0, pid = 0;
    bool closed = false, alive = true;
    uint64_t records = 0;
    uint64_t capacity = 0;
    uint64_t heartbeat_ns = 0;
    std::vector<vccl::telemetry::PathStats> paths;           // in use, by slot: peer and path from the slot
    std::vector<vccl::telemetry::PathTotalsCopy> totals;     // paths[i]'s totals
    vccl::telemetry::CollTotalsCopy colls[vccl::telemetry::kCollKinds];
    /* Header::path_devices and multipath: empty and false for a ring whose writer did not describe them. */
    std::string path_devices[vccl::telemetry::kMaxPathsPerPeer];
    bool spray = false;
};

/* A vccl-* file in the directory that could not be read as a ring, and why. */
struct RingProblem {
    std::string file;
    std::string reason;
};

/* Every ring file in dir owned by this user, sorted by communicator and rank. Files that are not rings
 * are skipped; with `problems`, each is listed there with the reason (else quietly). A missing directory
 * gives no rings. */
std::vector<RingView> scan_rings(const std::string& dir, std::vector<RingProblem>* problems = nullptr);

/* The rings of a directory kept mapped between scans (vccl-telemetry serve): a scan maps only files it has
 * not seen (or that were replaced: another inode or size) and unmaps those that are gone. Unmapping is what a
 * scan of many rings spent its time on (each munmap of a shared mapping costs a TLB shootdown), so a
 * scraper that comes back every second should not pay it again for rings that are still there. */
class RingCache {
public:
    std::vector<RingView> scan(const std::string& dir, std::vector<RingProblem>* problems = nullptr);
    size_t mapped() const { return entries_.size(); }

private:
    struct Entry {
        std::unique_ptr<vccl::telemetry::RingReader> reader;
        dev_t dev = 0;
        ino_t ino = 0;
        off_t size = 0;
        bool seen = false;
    };
    std::map<std::string, Entry> entries_;
};

/* One ring file: false with *why when it is not a readable ring. Owner and type are the caller's check. */
bool read_ring_file(const std::string& path, RingView* out, std::string* why);
/* Copies an attached ring into *out. A file truncated under the mapping (a ring replaced or damaged while
 * read) faults on access: that fault is caught here and gives false with *why, not a crash. */
bool read_attached(const vccl::telemetry::RingReader& reader, RingView* out, std::string* why);

/* "live", "closed" (communicator destroyed) or "dead" (writer process gone). */
const char* ring_status(const RingView& v);

/* A JSON string literal for s. */
std::string json_str(const std::string& s);
/* "12.34 MB" (powers of 1000). */
std::string human_bytes(double bytes);

/* The path's part of its connection's traffic: bytes sent and received on it over those of every path of the
 * ring to the same peer, 0 to 1; negative when the connection carried nothing yet. With VCCL_MULTIPATH=spray
 * both paths of a healthy connection carry chunks, each in proportion to its measured speed. */
double path_share(const RingView& v, const vccl::telemetry::PathStats& p);
/* path_share as "63.2%", or "-". */
std::string share_text(double share);

} // namespace vtel

#endif
