/* SPDX-License-Identifier: BSD-3-Clause */
/* Process-wide CUDA IPC mappings (ipc_handles.h). */
#include "transport/cuda_ipc/ipc_handles.h"

#include <cstring>
#include <mutex>
#include <vector>

#include "config.h"

#if VCCL_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace vccl {
namespace ipc_handles {

namespace {

/* Lock order: table_mutex, then use_mutex (exclusive, only to mark mappings others may hold closed). close_mutex is
 * taken with neither held. All three, and the table, are never destroyed: a communicator's teardown may run on a
 * thread that outlives the process's static destructors (device/stream_order.cc, TeardownExitGuard). */
std::mutex& table_mutex() {
    static std::mutex* m = new std::mutex;
    return *m;
}
std::shared_mutex& use_mutex() {
    static std::shared_mutex* m = new std::shared_mutex;
    return *m;
}
std::mutex& close_mutex() { // one cudaIpcCloseMemHandle at a time; an open that failed waits for those in flight
    static std::mutex* m = new std::mutex;
    return *m;
}
std::vector<Ref>& table() { // open mappings only
    static std::vector<Ref>* t = new std::vector<Ref>;
    return *t;
}

constexpr unsigned kBlockShift = 21; // CUDA maps cudaMalloc memory to other processes in 2 MiB blocks

bool blocks_overlap(const Mapping& m, uint64_t base, uint64_t size) {
    auto last = [](uint64_t b, uint64_t n) { return (b + (n > 0 ? n - 1 : 0)) >> kBlockShift; };
    return (m.alloc_base >> kBlockShift) <= last(base, size) && (base >> kBlockShift) <= last(m.alloc_base, m.alloc_size);
}

#if VCCL_HAVE_CUDA
/* Marks the table's mappings that `pick` selects closed and drops them from the table, for all their users; caller
 * holds table_mutex. Their closing is the caller's, once it has let go of the table (close_now). */
template <typename Pick> std::vector<Ref> take_out(Pick pick) {
    std::vector<Ref>& t = table();
    std::vector<Ref> out;
    std::unique_lock<std::shared_mutex> no_copies_enqueued_meanwhile(use_mutex());
    for (size_t i = 0; i < t.size();) {
        if (t[i]->kept || t[i]->graph_holds > 0 || !pick(*t[i])) {
            ++i;
            continue;
        }
        t[i]->open.store(false);
        out.push_back(t[i]);
        t.erase(t.begin() + long(i));
    }
    return out;
}

/* Closes mappings taken out of the table, each on the GPU it was opened for; no table lock held. */
void close_now(const std::vector<Ref>& gone) {
    if (gone.empty()) return;
    std::lock_guard<std::mutex> one_at_a_time(close_mutex());
    int current = -1;
    if (cudaGetDevice(&current) != cudaSuccess) current = -1;
    for (const Ref& m : gone) {
        if (m->device >= 0 && m->device != current) cudaSetDevice(m->device);
        cudaIpcCloseMemHandle(m->ptr);
        if (m->device >= 0 && m->device != current && current >= 0) cudaSetDevice(current);
    }
    cudaGetLastError();
}
#endif

} // namespace

UseLock::UseLock() : lock_(use_mutex()) {}

int acquire(const Exporter& exporter, int device, const char* handle, uint64_t alloc_base, uint64_t alloc_size,
            Ref* out, bool* made_room) {
    *made_room = false;
#if VCCL_HAVE_CUDA
    cudaIpcMemHandle_t h;
    static_assert(sizeof(h) <= sizeof(Mapping::handle), "IPC handle size");
    memcpy(&h, handle, sizeof(h));
    cudaError_t err = cudaSuccess;
    enum class Try { Opened, Refused, Failed }; // Refused: CUDA says the block is mapped already
    auto try_open = [&]() { // caller holds table_mutex: shares the open mapping, or opens one
        for (const Ref& m : table()) {
            if (m->exporter == exporter && m->device == device && memcmp(m->handle, handle, sizeof(m->handle)) == 0) {
                ++m->users;
                *out = m;
                return Try::Opened;
            }
        }
        void* ptr = nullptr;
        err = cudaIpcOpenMemHandle(&ptr, h, cudaIpcMemLazyEnablePeerAccess);
        if (err != cudaSuccess) {
            cudaGetLastError();
            return err == cudaErrorAlreadyMapped ? Try::Refused : Try::Failed;
        }
        auto m = std::make_shared<Mapping>();
        m->exporter = exporter;
        m->device = device;
        memcpy(m->handle, handle, sizeof(m->handle));
        m->alloc_base = alloc_base;
        m->alloc_size = alloc_size;
        m->ptr = ptr;
        m->users = 1;
        table().push_back(m);
        *out = m;
        return Try::Opened;
    };
    // Round 0 opens. Refused, round 1 first closes that exporter's mappings whose blocks overlap (stale: the
    // allocation was freed and this one made over it; or a live neighbour, which its users open again when they next
    // need it), round 2 every mapping of that exporter (CUDA's block may be larger than 2 MiB; they are a cache).
    // With nothing of its own to close, a round waits for the closes other threads have in flight.
    for (int round = 0; round < 3; ++round) {
        std::vector<Ref> gone;
        {
            std::lock_guard<std::mutex> guard(table_mutex());
            if (round > 0) {
                gone = take_out([&](const Mapping& m) {
                    return m.exporter == exporter && m.device == device &&
                           (round == 2 || blocks_overlap(m, alloc_base, alloc_size));
                });
            }
            if (gone.empty()) {
                Try t = try_open();
                if (t != Try::Refused) return t == Try::Opened ? 0 : int(err);
            }
        }
        if (gone.empty()) {
            if (round > 0) {
                std::lock_guard<std::mutex> wait_for_closes_in_flight(close_mutex());
            }
            continue;
        }
        *made_room = true;
        close_now(gone);
        std::lock_guard<std::mutex> guard(table_mutex());
        Try t = try_open();
        if (t != Try::Refused) return t == Try::Opened ? 0 : int(err);
    }
    return int(err);
#else
    (void)exporter, (void)device, (void)handle, (void)alloc_base, (void)alloc_size, (void)out;
    return 1;
#endif
}

void release(const Ref& ref) {
#if VCCL_HAVE_CUDA
    if (!ref) return;
    {
        std::lock_guard<std::mutex> guard(table_mutex());
        if (--ref->users > 0 || !ref->open.load() || ref->kept) return;
        // No user is left, so no copy into it is being enqueued: no need for the exclusive UseLock.
        ref->open.store(false);
        std::vector<Ref>& t = table();
        for (size_t i = 0; i < t.size(); ++i) {
            if (t[i] == ref) {
                t.erase(t.begin() + long(i));
                break;
            }
        }
    }
    close_now({ref});
#else
    (void)ref;
#endif
}

bool hold_for_graph(const Ref& ref) {
    if (!ref) return false;
    std::lock_guard<std::mutex> guard(table_mutex()); // take_out marks mappings closed under it
    if (!ref->open.load()) return false;
    ++ref->users;
    ++ref->graph_holds;
    return true;
}

void release_from_graph(const Ref& ref) {
    if (!ref) return;
    {
        std::lock_guard<std::mutex> guard(table_mutex());
        --ref->graph_holds;
    }
    release(ref);
}

void keep_for_good(const Ref& ref) {
    if (!ref) return;
    std::lock_guard<std::mutex> guard(table_mutex());
    ref->kept = true;
}

} // namespace ipc_handles
} // namespace vccl
