/* SPDX-License-Identifier: BSD-3-Clause */
/* The live telemetry rings of this user (/dev/shm/vccl-*), read once, and the small text helpers that
 * vccl-telemetry and vccl-diag share. One reader for both tools, so that they always agree on what a ring
 * says. */
#ifndef VCCL_TOOLS_TELEMETRY_RINGS_H_
#define VCCL_TOOLS_TELEMETRY_RINGS_H_

#include <cstdint>
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

} // namespace vtel

#endif
