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

#include "device/driver_entry.h"
#endif

namespace vccl {
namespace vmm {

#if VCCL_HAVE_CUDA

namespace {

/* Driver entry points through the runtime: vccl links no libcuda, so it loads where no driver exists. */
struct Api {
    decltype(&cuDeviceGet) device_get = nullptr;
    decltype(&cuDeviceGetAttribute) device_attribute = nullptr;
    decltype(&cuMemGetAllocationGranularity) granularity = nullptr;
    decltype(&cuMemCreate) create = nullptr;
    decltype(&cuMemRelease) release = nullptr;
    decltype(&cuMemAddressReserve) reserve = nullptr;
    decltype(&cuMemAddressFree) address_free = nullptr;
    decltype(&cuMemMap) map = nullptr;
    decltype(&cuMemUnmap) unmap = nullptr;
    decltype(&cuMemSetAccess) set_access = nullptr;
    decltype(&cuMemExportToShareableHandle) export_handle = nullptr;
    decltype(&cuMemImportFromShareableHandle) import_handle = nullptr;
    bool ok = false;
};

const Api& api() {
    static const Api a = [] {
        Api x;
        x.ok = load_driver_entry("cuDeviceGet", &x.device_get) &&
               load_driver_entry("cuDeviceGetAttribute", &x.device_attribute) &&
               load_driver_entry("cuMemGetAllocationGranularity", &x.granularity) &&
               load_driver_entry("cuMemCreate", &x.create) && load_driver_entry("cuMemRelease", &x.release) &&
               load_driver_entry("cuMemAddressReserve", &x.reserve) &&
               load_driver_entry("cuMemAddressFree", &x.address_free) && load_driver_entry("cuMemMap", &x.map) &&
               load_driver_entry("cuMemUnmap", &x.unmap) && load_driver_entry("cuMemSetAccess", &x.set_access) &&
               load_driver_entry("cuMemExportToShareableHandle", &x.export_handle) &&
               load_driver_entry("cuMemImportFromShareableHandle", &x.import_handle);
        return x;
    }();
    return a;
}

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
uint64_t g_next_id = 0;

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
    if (!api().ok) return fail("the CUDA driver lacks the VMM entry points");
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

int export_fd(uint64_t id) {
    std::lock_guard<std::mutex> lock(g_mutex);
    Entry* e = by_id(id);
    if (e == nullptr) return -1;
    if (e->fd < 0) {
        int fd = -1;
        if (api().export_handle(&fd, e->handle, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0) != CUDA_SUCCESS) return -1;
        e->fd = fd;
    }
    // A copy: vcclMemFree may close the kept one while the caller is still sending this one.
    return fcntl(e->fd, F_DUPFD_CLOEXEC, 0);
}

bool alive(uint64_t id) {
    std::lock_guard<std::mutex> lock(g_mutex);
    return by_id(id) != nullptr;
}

vcclResult_t import(int fd, size_t size, int device, void** ptr) {
    *ptr = nullptr;
    if (!api().ok) {
        close(fd);
        return set_last_error(vcclUnhandledCudaError, "mapping a peer's VMM buffer: the CUDA driver lacks the VMM entry points");
    }
    CUmemGenericAllocationHandle handle;
    CUresult r = api().import_handle(&handle, reinterpret_cast<void*>(uintptr_t(fd)), CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
    close(fd); // the handle holds the allocation now
    if (r != CUDA_SUCCESS) return cu_fail("cuMemImportFromShareableHandle of a peer's buffer", r);
    CUdeviceptr va = 0;
    r = api().reserve(&va, size, 0, 0, 0);
    if (r != CUDA_SUCCESS) {
        api().release(handle);
        return cu_fail("cuMemAddressReserve for a peer's buffer", r);
    }
    r = api().map(va, size, 0, handle, 0);
    api().release(handle); // the mapping keeps it alive until unmap
    if (r != CUDA_SUCCESS) {
        api().address_free(va, size);
        return cu_fail("cuMemMap of a peer's buffer", r);
    }
    CUmemAccessDesc a = {};
    a.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    a.location.id = device;
    a.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    r = api().set_access(va, size, &a, 1);
    if (r != CUDA_SUCCESS) {
        api().unmap(va, size);
        api().address_free(va, size);
        return cu_fail("cuMemSetAccess on a peer's buffer", r);
    }
    *ptr = reinterpret_cast<void*>(va);
    return vcclSuccess;
}

void unmap(void* ptr, size_t size) {
    if (ptr == nullptr || !api().ok) return;
    CUdeviceptr va = reinterpret_cast<CUdeviceptr>(ptr);
    api().unmap(va, size);
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
int export_fd(uint64_t) { return -1; }
bool alive(uint64_t) { return false; }
vcclResult_t import(int fd, size_t, int, void** ptr) {
    close(fd);
    *ptr = nullptr;
    return set_last_error(vcclUnhandledCudaError, "vccl was built without CUDA");
}
void unmap(void*, size_t) {}

#endif

} // namespace vmm
} // namespace vccl
