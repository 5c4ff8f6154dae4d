/* Process-wide CUDA IPC mappings (ipc_handles.h). */
#include "device/ipc_handles.h"

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

/* Lock order: table_mutex, then use_mutex (exclusive, only to close a mapping others may hold). */
std::mutex& table_mutex() {
    static std::mutex m;
    return m;
}
std::shared_mutex& use_mutex() {
    static std::shared_mutex m;
    return m;
}
std::vector<Ref>& table() { // open mappings only
    static std::vector<Ref> t;
    return t;
}

constexpr unsigned kBlockShift = 21; // CUDA maps cudaMalloc memory to other processes in 2 MiB blocks

bool blocks_overlap(const Mapping& m, uint64_t base, uint64_t size) {
    auto last = [](uint64_t b, uint64_t n) { return (b + (n > 0 ? n - 1 : 0)) >> kBlockShift; };
    return (m.alloc_base >> kBlockShift) <= last(base, size) && (base >> kBlockShift) <= last(m.alloc_base, m.alloc_size);
}

#if VCCL_HAVE_CUDA
/* Closes the table's mappings that `pick` selects, for all their users; caller holds table_mutex. Returns whether
 * any was closed. */
template <typename Pick> bool close_for_everyone(Pick pick) {
    std::vector<Ref>& t = table();
    std::unique_lock<std::shared_mutex> no_copies_meanwhile(use_mutex());
    bool closed = false;
    for (size_t i = 0; i < t.size();) {
        if (t[i]->kept || !pick(*t[i])) {
            ++i;
            continue;
        }
        cudaIpcCloseMemHandle(t[i]->ptr);
        cudaGetLastError();
        t[i]->open.store(false);
        t.erase(t.begin() + long(i));
        closed = true;
    }
    return closed;
}
#endif

} // namespace

UseLock::UseLock() : lock_(use_mutex()) {}

int acquire(const Exporter& exporter, const char* handle, uint64_t alloc_base, uint64_t alloc_size, Ref* out,
            bool* made_room) {
    *made_room = false;
#if VCCL_HAVE_CUDA
    std::lock_guard<std::mutex> guard(table_mutex());
    for (const Ref& m : table()) {
        if (m->exporter == exporter && memcmp(m->handle, handle, sizeof(m->handle)) == 0) {
            ++m->users;
            *out = m;
            return 0;
        }
    }
    cudaIpcMemHandle_t h;
    static_assert(sizeof(h) <= sizeof(Mapping::handle), "IPC handle size");
    memcpy(&h, handle, sizeof(h));
    void* ptr = nullptr;
    cudaError_t err = cudaIpcOpenMemHandle(&ptr, h, cudaIpcMemLazyEnablePeerAccess);
    if (err != cudaSuccess) {
        cudaGetLastError();
        // Another mapping of the exporter's in the same blocks: stale (its allocation was freed and this one made
        // over it), or a live neighbour, which its users open again when they next need it.
        bool closed = close_for_everyone([&](const Mapping& m) {
            return m.exporter == exporter && blocks_overlap(m, alloc_base, alloc_size);
        });
        if (closed) {
            *made_room = true;
            err = cudaIpcOpenMemHandle(&ptr, h, cudaIpcMemLazyEnablePeerAccess);
        }
        if (err == cudaErrorAlreadyMapped) {
            // CUDA's block around this buffer is larger than 2 MiB, or the allocator put it elsewhere: every
            // mapping of this exporter goes (they are a cache), and one more try.
            cudaGetLastError();
            if (close_for_everyone([&](const Mapping& m) { return m.exporter == exporter; })) {
                *made_room = true;
                err = cudaIpcOpenMemHandle(&ptr, h, cudaIpcMemLazyEnablePeerAccess);
            }
        }
        if (err != cudaSuccess) {
            cudaGetLastError();
            return int(err);
        }
    }
    auto m = std::make_shared<Mapping>();
    m->exporter = exporter;
    memcpy(m->handle, handle, sizeof(m->handle));
    m->alloc_base = alloc_base;
    m->alloc_size = alloc_size;
    m->ptr = ptr;
    m->users = 1;
    table().push_back(m);
    *out = m;
    return 0;
#else
    (void)exporter, (void)handle, (void)alloc_base, (void)alloc_size, (void)out;
    return 1;
#endif
}

void release(const Ref& ref) {
#if VCCL_HAVE_CUDA
    if (!ref) return;
    std::lock_guard<std::mutex> guard(table_mutex());
    if (--ref->users > 0 || !ref->open.load() || ref->kept) return;
    // No user is left, so no copy into it is being enqueued: no need to wait for UseLock holders.
    cudaIpcCloseMemHandle(ref->ptr);
    cudaGetLastError();
    ref->open.store(false);
    std::vector<Ref>& t = table();
    for (size_t i = 0; i < t.size(); ++i) {
        if (t[i] == ref) {
            t.erase(t.begin() + long(i));
            break;
        }
    }
#else
    (void)ref;
#endif
}

void keep_for_good(const Ref& ref) {
    if (!ref) return;
    std::lock_guard<std::mutex> guard(table_mutex());
    ref->kept = true;
}

size_t open_count() {
    std::lock_guard<std::mutex> guard(table_mutex());
    return table().size();
}

} // namespace ipc_handles
} // namespace vccl
