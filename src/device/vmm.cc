/* SPDX-License-Identifier: BSD-3-Clause */
#include "device/vmm.h"

#include <fcntl.h>
#include <unistd.h>

#include <map>
#include <mutex>
#include <vector>

#include "config.h"
#include "core/status.h"

#if VCCL_HAVE_CUDA
#include <cuda.h>
#include <cuda_runtime_api.h>

#include "device/device_scope.h"
#include "device/driver_api.h"
#endif

namespace vccl {
namespace vmm {

#if VCCL_HAVE_CUDA

namespace {

/* The VMM entry points (device/driver_api.h). */
const DriverApi& api() { return driver_api(); }

struct Entry {
    size_t size;
    CUmemGenericAllocationHandle handle;
    uint64_t id;
    int fd;     // exported on first use, closed at free
    int device; // where it lives: vcclMemFree waits for that device, whichever is current
};

std::mutex g_mutex;
std::map<uintptr_t, Entry>& table() {
    static auto* t = new std::map<uintptr_t, Entry>(); // never freed: usable from exit handlers
    return *t;
}
uint64_t g_next_id = 0; // allocations and foreign spans share the ids

/* One mapping of VMM memory another allocator made: where, how long, and which physical allocation (the
 * driver's process-wide block id, which changes when the owner maps a new allocation there). */
struct Piece {
    uintptr_t base;
    size_t size;
    uint64_t block;
    bool operator==(const Piece& o) const { return base == o.base && size == o.size && block == o.block; }
};
struct Span {
    uint64_t id;
    std::vector<Piece> pieces;
    uint64_t last_use;
};
/* Spans described to peers recently, at most kMaxSpans (least recently used go first; a span that comes
 * back gets a new id and the peer maps it again). Under g_mutex. */
constexpr size_t kMaxSpans = 256;
std::vector<Span>& spans() {
    static auto* v = new std::vector<Span>();
    return *v;
}
uint64_t g_span_clock = 0;

/* The mapping of foreign VMM memory at `at`, when its allocation may be exported as a file descriptor. */
bool query_piece(uintptr_t at, Piece* out) {
    CUdeviceptr base = 0;
    size_t size = 0;
    // For VMM memory the address range is the one mapping that holds `at` (one allocation).
    if (api().address_range(&base, &size, CUdeviceptr(at)) != CUDA_SUCCESS || size == 0) return false;
    unsigned long long types = 0, block = 0;
    int legacy = 1;
    void* pool = nullptr;
    CUdeviceptr mapping_base = 0;
    size_t mapping_size = 0;
    // Exported allocations are mapped at their offset 0 by the peer (cuMemMap takes no other offset), so
    // the range must be exactly one whole mapping: not a stream-ordered pool's sub-allocation (its range
    // is a piece of the pool's mapping), and the driver's own mapping attributes must agree.
    if (api().pointer_attribute(&legacy, CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE, CUdeviceptr(at)) != CUDA_SUCCESS ||
        legacy != 0 ||
        api().pointer_attribute(&pool, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, CUdeviceptr(at)) != CUDA_SUCCESS ||
        pool != nullptr ||
        api().pointer_attribute(&mapping_base, CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR, CUdeviceptr(at)) != CUDA_SUCCESS ||
        api().pointer_attribute(&mapping_size, CU_POINTER_ATTRIBUTE_MAPPING_SIZE, CUdeviceptr(at)) != CUDA_SUCCESS ||
        mapping_base != base || mapping_size != size ||
        api().pointer_attribute(&types, CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES, CUdeviceptr(at)) != CUDA_SUCCESS ||
        !(types & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) ||
        api().pointer_attribute(&block, CU_POINTER_ATTRIBUTE_MEMORY_BLOCK_ID, CUdeviceptr(at)) != CUDA_SUCCESS) {
        return false;
    }
    *out = Piece{uintptr_t(base), size, uint64_t(block)};
    return true;
}

/* The pieces of a span as the driver sees them now; false when any is gone or not exportable. */
bool pieces_unchanged(const Span& span) {
    for (const Piece& p : span.pieces) {
        Piece now;
        if (!query_piece(p.base, &now) || !(now == p)) return false;
    }
    return true;
}

Span* span_by_id(uint64_t id) {
    for (Span& s : spans()) {
        if (s.id == id) return &s;
    }
    return nullptr;
}

/* The entry of allocation `id`, or NULL; callers hold g_mutex. */
Entry* by_id(uint64_t id) {
    for (auto& kv : table()) {
        if (kv.second.id == id) return &kv.second;
    }
    return nullptr;
}

CUmemAllocationProp prop_for(CUdevice dev) {
    CUmemAllocationProp prop = {};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = int(dev);
    prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    int rdma = 0;
    if (api().device_attribute(&rdma, CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED, dev) == CUDA_SUCCESS &&
        rdma != 0) {
        prop.allocFlags.gpuDirectRDMACapable = 1;
    }
    return prop;
}

} // namespace

bool supported(int device, std::string* why) {
    auto fail = [&](const char* text) {
        if (why != nullptr) *why = text;
        return false;
    };
    if (!api().vmm_ok) return fail("the CUDA driver lacks the VMM entry points");
    CUdevice dev;
    if (api().device_get(&dev, device) != CUDA_SUCCESS) return fail("no such CUDA device");
    int vmm = 0, posix = 0;
    api().device_attribute(&vmm, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, dev);
    api().device_attribute(&posix, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED, dev);
    if (vmm == 0) return fail("the GPU does not support CUDA virtual memory management");
    if (posix == 0) return fail("the GPU cannot export VMM memory as a file descriptor");
    return true;
}

vcclResult_t alloc(int device, size_t size, void** ptr) {
    *ptr = nullptr;
    CUdevice dev;
    api().device_get(&dev, device);
    CUmemAllocationProp prop = prop_for(dev);
    size_t granularity = 0;
    CUresult r = api().granularity(&granularity, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED);
    if (r != CUDA_SUCCESS || granularity == 0) return cu_fail("vcclMemAlloc: cuMemGetAllocationGranularity", r);
    if (size > SIZE_MAX - granularity) return set_last_error(vcclInvalidArgument, "vcclMemAlloc: size %zu is too large", size);
    size_t rounded = (size + granularity - 1) / granularity * granularity;
    CUmemGenericAllocationHandle handle;
    r = api().create(&handle, rounded, &prop, 0);
    if (r != CUDA_SUCCESS) return cu_fail("vcclMemAlloc: cuMemCreate", r);
    CUdeviceptr va = 0;
    r = api().reserve(&va, rounded, granularity, 0, 0);
    if (r != CUDA_SUCCESS) {
        api().release(handle);
        return cu_fail("vcclMemAlloc: cuMemAddressReserve", r);
    }
    r = api().map(va, rounded, 0, handle, 0);
    if (r != CUDA_SUCCESS) {
        api().address_free(va, rounded);
        api().release(handle);
        return cu_fail("vcclMemAlloc: cuMemMap", r);
    }
    // Access for this GPU and for every GPU that can reach it as a peer, as cudaMalloc memory has once peer
    // access is enabled: a communicator of this process on another GPU may copy into it.
    std::vector<CUmemAccessDesc> access;
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess) count = 0;
    for (int d = 0; d < count; ++d) {
        int can = d == device ? 1 : 0;
        if (d != device && cudaDeviceCanAccessPeer(&can, d, device) != cudaSuccess) can = 0;
        if (!can) continue;
        CUmemAccessDesc a = {};
        a.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
        a.location.id = d;
        a.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
        access.push_back(a);
    }
    cudaGetLastError();
    r = api().set_access(va, rounded, access.data(), access.size());
    if (r != CUDA_SUCCESS) {
        api().unmap(va, rounded);
        api().address_free(va, rounded);
        api().release(handle);
        return cu_fail("vcclMemAlloc: cuMemSetAccess", r);
    }
    {
        std::lock_guard<std::mutex> lock(g_mutex);
        table()[uintptr_t(va)] = Entry{rounded, handle, ++g_next_id, -1, device};
    }
    *ptr = reinterpret_cast<void*>(va);
    return vcclSuccess;
}

bool owns(const void* ptr) {
    std::lock_guard<std::mutex> lock(g_mutex);
    return table().count(reinterpret_cast<uintptr_t>(ptr)) != 0;
}

vcclResult_t free(void* ptr) {
    Entry entry;
    {
        std::lock_guard<std::mutex> lock(g_mutex);
        auto it = table().find(reinterpret_cast<uintptr_t>(ptr));
        if (it == table().end()) {
            return set_last_error(vcclInvalidArgument, "vcclMemFree: %p was not allocated by vcclMemAlloc (or was freed)",
                                  ptr);
        }
        entry = it->second;
        table().erase(it); // from here on no transfer describes it to a peer
    }
    // cudaFree waits for the device before it frees; unmapping does not, and a copy still in flight would fault.
    int current = -1;
    if (cudaGetDevice(&current) == cudaSuccess && current != entry.device) cudaSetDevice(entry.device);
    cudaError_t e = cudaDeviceSynchronize();
    if (e != cudaSuccess) cudaGetLastError(); // a sticky error elsewhere: freeing is still right
    if (current >= 0 && current != entry.device) cudaSetDevice(current);
    CUdeviceptr va = reinterpret_cast<CUdeviceptr>(ptr);
    CUresult r1 = api().unmap(va, entry.size);
    CUresult r2 = api().address_free(va, entry.size);
    CUresult r3 = api().release(entry.handle);
    if (entry.fd >= 0) close(entry.fd);
    if (r1 != CUDA_SUCCESS) return cu_fail("vcclMemFree: cuMemUnmap", r1);
    if (r2 != CUDA_SUCCESS) return cu_fail("vcclMemFree: cuMemAddressFree", r2);
    if (r3 != CUDA_SUCCESS) return cu_fail("vcclMemFree: cuMemRelease", r3);
    return vcclSuccess;
}

bool find(const void* p, size_t bytes, Allocation* out) {
    uintptr_t b = reinterpret_cast<uintptr_t>(p);
    std::lock_guard<std::mutex> lock(g_mutex);
    if (table().empty()) return false;
    auto it = table().upper_bound(b);
    if (it == table().begin()) return false;
    --it;
    if (b + bytes > it->first + it->second.size || b + bytes < b) return false;
    *out = Allocation{it->second.id, it->first, it->second.size};
    return true;
}

bool find_foreign(const void* p, size_t bytes, Allocation* out) {
    if (!api().vmm_foreign_ok || p == nullptr || bytes == 0) return false;
    const uintptr_t begin = reinterpret_cast<uintptr_t>(p), end = begin + bytes;
    if (end < begin) return false;
    std::vector<Piece> pieces;
    for (uintptr_t at = begin; at < end;) {
        Piece piece;
        if (pieces.size() >= kMaxSpanPieces || !query_piece(at, &piece) || piece.base > at) return false;
        pieces.push_back(piece);
        at = piece.base + piece.size; // the next mapping must start here, or the buffer has a gap
    }
    std::lock_guard<std::mutex> lock(g_mutex);
    std::vector<Span>& list = spans();
    Span* span = nullptr;
    for (Span& s : list) {
        if (s.pieces == pieces) span = &s;
    }
    if (span == nullptr) {
        if (list.size() >= kMaxSpans) {
            size_t oldest = 0;
            for (size_t i = 1; i < list.size(); ++i) {
                if (list[i].last_use < list[oldest].last_use) oldest = i;
            }
            list.erase(list.begin() + long(oldest));
        }
        list.push_back(Span{++g_next_id, pieces, 0});
        span = &list.back();
    }
    span->last_use = ++g_span_clock;
    size_t total = 0;
    for (const Piece& piece : pieces) total += piece.size;
    *out = Allocation{span->id, pieces.front().base, total};
    return true;
}

bool export_fds(uint64_t id, std::vector<int>* fds, std::vector<uint64_t>* sizes) {
    fds->clear();
    sizes->clear();
    std::lock_guard<std::mutex> lock(g_mutex);
    if (Entry* e = by_id(id)) {
        if (e->fd < 0) {
            int fd = -1;
            if (api().export_handle(&fd, e->handle, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0) != CUDA_SUCCESS) return false;
            e->fd = fd;
        }
        // A copy: vcclMemFree may close the kept one while the caller is still sending this one.
        int fd = fcntl(e->fd, F_DUPFD_CLOEXEC, 0);
        if (fd < 0) return false;
        fds->push_back(fd);
        sizes->push_back(e->size);
        return true;
    }
    Span* span = span_by_id(id);
    if (span == nullptr) return false;
    auto give_up = [&] {
        for (int f : *fds) close(f);
        fds->clear();
        sizes->clear();
        return false;
    };
    for (const Piece& piece : span->pieces) {
        CUmemGenericAllocationHandle handle;
        int fd = -1;
        bool ok = api().retain(&handle, reinterpret_cast<void*>(piece.base)) == CUDA_SUCCESS;
        if (ok) {
            ok = api().export_handle(&fd, handle, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0) == CUDA_SUCCESS;
            api().release(handle); // drops the reference retain took; the owner's stays
        }
        if (!ok) return give_up();
        fds->push_back(fd);
        sizes->push_back(piece.size);
    }
    // Checked after exporting, so that what went out is what the span names: the owner may have mapped other
    // memory since the span was described, or while its pieces were exported. Then the caller stages this
    // transfer and the next describe names a new span.
    return pieces_unchanged(*span) || give_up();
}

bool alive(uint64_t id) {
    std::lock_guard<std::mutex> lock(g_mutex);
    if (by_id(id) != nullptr) return true;
    Span* span = span_by_id(id);
    return span != nullptr && pieces_unchanged(*span);
}

namespace {

/* Imports made of several pieces (mapping start -> piece sizes): each piece is unmapped on its own. */
std::map<uintptr_t, std::vector<size_t>>& imported_pieces() {
    static auto* m = new std::map<uintptr_t, std::vector<size_t>>();
    return *m;
}

void unmap_pieces(CUdeviceptr va, const std::vector<size_t>& sizes, size_t mapped) {
    size_t offset = 0;
    for (size_t i = 0; i < mapped; ++i) {
        api().unmap(va + offset, sizes[i]);
        offset += sizes[i];
    }
}

} // namespace

vcclResult_t import(const std::vector<int>& fds, const std::vector<uint64_t>& sizes, int device, void** ptr) {
    *ptr = nullptr;
    auto close_from = [&](size_t first) {
        for (size_t i = first; i < fds.size(); ++i) close(fds[i]);
    };
    if (!api().vmm_ok) {
        close_from(0);
        return set_last_error(vcclUnhandledCudaError, "mapping a peer's VMM buffer: the CUDA driver lacks the VMM entry points");
    }
    size_t total = 0;
    std::vector<size_t> piece_sizes;
    for (uint64_t s : sizes) {
        if (s == 0 || total + s < total) {
            close_from(0);
            return set_last_error(vcclInternalError, "a peer described a VMM buffer with a bad piece size");
        }
        total += size_t(s);
        piece_sizes.push_back(size_t(s));
    }
    if (fds.empty() || fds.size() != sizes.size()) {
        close_from(0);
        return set_last_error(vcclInternalError, "a peer sent %zu descriptors for %zu VMM pieces", fds.size(), sizes.size());
    }
    CUdeviceptr va = 0;
    CUresult r = api().reserve(&va, total, 0, 0, 0);
    if (r != CUDA_SUCCESS) {
        close_from(0);
        return cu_fail("cuMemAddressReserve for a peer's buffer", r);
    }
    size_t offset = 0;
    for (size_t i = 0; i < fds.size(); ++i) {
        CUmemGenericAllocationHandle handle;
        r = api().import_handle(&handle, reinterpret_cast<void*>(uintptr_t(fds[i])), CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
        close(fds[i]); // the handle holds the allocation now
        const char* what = "cuMemImportFromShareableHandle of a peer's buffer";
        if (r == CUDA_SUCCESS) {
            r = api().map(va + offset, piece_sizes[i], 0, handle, 0);
            api().release(handle); // the mapping keeps it alive until unmap
            what = "cuMemMap of a peer's buffer";
        }
        CUmemAccessDesc a = {};
        a.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
        a.location.id = device;
        a.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
        if (r == CUDA_SUCCESS) {
            r = api().set_access(va + offset, piece_sizes[i], &a, 1);
            what = "cuMemSetAccess on a peer's buffer";
            if (r != CUDA_SUCCESS) api().unmap(va + offset, piece_sizes[i]);
        }
        if (r != CUDA_SUCCESS) {
            close_from(i + 1);
            unmap_pieces(va, piece_sizes, i);
            api().address_free(va, total);
            return cu_fail(what, r);
        }
        offset += piece_sizes[i];
    }
    if (piece_sizes.size() > 1) {
        std::lock_guard<std::mutex> lock(g_mutex);
        imported_pieces()[uintptr_t(va)] = piece_sizes;
    }
    *ptr = reinterpret_cast<void*>(va);
    return vcclSuccess;
}

void unmap(void* ptr, size_t size) {
    if (ptr == nullptr || !api().vmm_ok) return;
    CUdeviceptr va = reinterpret_cast<CUdeviceptr>(ptr);
    std::vector<size_t> pieces{size};
    {
        std::lock_guard<std::mutex> lock(g_mutex);
        auto it = imported_pieces().find(uintptr_t(va));
        if (it != imported_pieces().end()) {
            pieces = it->second;
            imported_pieces().erase(it);
        }
    }
    unmap_pieces(va, pieces, pieces.size());
    api().address_free(va, size);
}

#else // no CUDA

bool supported(int, std::string* why) {
    if (why != nullptr) *why = "vccl was built without CUDA";
    return false;
}
vcclResult_t alloc(int, size_t, void** ptr) {
    *ptr = nullptr;
    return set_last_error(vcclUnhandledCudaError, "vcclMemAlloc: vccl was built without CUDA");
}
bool owns(const void*) { return false; }
vcclResult_t free(void* ptr) {
    return set_last_error(vcclInvalidArgument, "vcclMemFree: %p was not allocated by vcclMemAlloc (or was freed)", ptr);
}
bool find(const void*, size_t, Allocation*) { return false; }
bool find_foreign(const void*, size_t, Allocation*) { return false; }
bool export_fds(uint64_t, std::vector<int>* fds, std::vector<uint64_t>* sizes) {
    fds->clear();
    sizes->clear();
    return false;
}
bool alive(uint64_t) { return false; }
vcclResult_t import(const std::vector<int>& fds, const std::vector<uint64_t>&, int, void** ptr) {
    for (int fd : fds) close(fd);
    *ptr = nullptr;
    return set_last_error(vcclUnhandledCudaError, "vccl was built without CUDA");
}
void unmap(void*, size_t) {}

#endif

} // namespace vmm
} // namespace vccl
