/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * CUDA IPC mappings of peers' receive buffers, shared by every communicator of the process.
 *
 * CUDA maps an exported block of cudaMalloc memory only once per process. With a cache per communicator, a
 * second communicator opening a handle in a block that the first had mapped (the same buffer, a neighbour in its
 * 2 MiB block, or a new buffer where a freed one had been) got cudaErrorAlreadyMapped, and its transfer failed
 * (GpuStreamOrder.AllReduceGatherWaitsForThePeersEarlierWork: 2 ranks sharing one H200, a test communicator
 * beside the suite's). Here each handle is opened once and counted; when CUDA still refuses, the mappings of the
 * same exporter whose blocks overlap are closed for every communicator (they are stale, or a neighbour's that
 * its users open again at their next transfer), and the handle is opened again.
 *
 * Closing a mapping another thread is about to copy into would send that copy to an unmapped (or reused)
 * address, so a copy is enqueued under UseLock after checking that its mapping is still open, and a mapping is marked
 * closed under the exclusive lock. Copies enqueued before are waited for by cudaIpcCloseMemHandle itself, which runs
 * after every lock of the table is let go (it may wait for a stream that waits for a peer), one close at a time.
 * Mappings are per importing GPU: a handle opened for one GPU of the process is not shared with another's
 * communicators. The peers' flag buffers are not here: each communicator keeps those mapped for its life.
 */
#ifndef VCCL_TRANSPORT_CUDA_IPC_IPC_HANDLES_H_
#define VCCL_TRANSPORT_CUDA_IPC_IPC_HANDLES_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <shared_mutex>

namespace vccl {
namespace ipc_handles {

/* The process that exported a handle: its host and process id. Allocation addresses are that process's. */
struct Exporter {
    uint64_t host = 0;
    int64_t pid = 0;
    bool operator==(const Exporter& o) const { return host == o.host && pid == o.pid; }
};

struct Mapping {
    Exporter exporter;
    int device;        // the GPU it was opened for (current at acquire)
    char handle[64];
    uint64_t alloc_base; // in the exporting process
    uint64_t alloc_size;
    void* ptr;                 // its address here
    std::atomic<bool> open{true}; // false once closed (by the last user, or to make room for another handle)
    int users = 0;             // counted references (acquire / release)
    bool kept = false;         // keep_for_good: never closed
    int graph_holds = 0;       // CUDA graphs copying into it (hold_for_graph): not closed to make room meanwhile
};
using Ref = std::shared_ptr<Mapping>;

/* Opens, for GPU `device` (the current one), the cudaIpcMemHandle_t `handle` of allocation [alloc_base, alloc_base
 * + alloc_size) of `exporter`, or shares its open mapping (one more user); *out the mapping. *made_room: other
 * mappings were closed first. Returns CUDA's error when it cannot be opened. Not under UseLock. */
int acquire(const Exporter& exporter, int device, const char* handle, uint64_t alloc_base, uint64_t alloc_size,
            Ref* out, bool* made_room);
/* One user fewer; the last one closes the mapping (cudaIpcCloseMemHandle waits for copies into it). */
void release(const Ref& ref);
/* The mapping stays open for the life of the process, and is never closed to make room: copies into it may wait on a
 * stream that will never run again (a communicator torn down with a blocked stream leaves its mappings so), and
 * closing it would wait for them for ever. A handle that needs its block then fails as it did before. */
void keep_for_good(const Ref& ref);

/* A CUDA graph captured a copy into the mapping: one more user, and the mapping is not closed to make room for
 * another handle until release_from_graph (a replay may come at any time). False when it was closed already. A
 * handle whose block overlaps a held mapping cannot be opened meanwhile (CUDA maps a block once per process); the
 * caching allocators' segments are whole blocks, so their buffers do not meet this. Not under UseLock. */
bool hold_for_graph(const Ref& ref);
void release_from_graph(const Ref& ref);

/* Held from the check that a mapping is still open (Mapping::open) until the copy into it is enqueued. */
class UseLock {
public:
    UseLock();
private:
    std::shared_lock<std::shared_mutex> lock_;
};

} // namespace ipc_handles
} // namespace vccl

#endif
