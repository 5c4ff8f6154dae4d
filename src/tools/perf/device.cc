/* SPDX-License-Identifier: BSD-3-Clause */
/* vccl-perf: the few CUDA runtime calls behind -m cuda. Without CUDA they report that it is missing. */
#include "config.h"
#include "tools/perf/perf.h"

#include <map>
#include <vector>

#if VCCL_HAVE_CUDA
#include <cuda.h>
#include <cuda_runtime.h>

#include "device/driver_api.h"
#endif

namespace vperf {

const char* device_alloc_name(DeviceAlloc how) {
    switch (how) {
    case DeviceAlloc::Vccl: return "vccl";
    case DeviceAlloc::Vmm: return "vmm";
    default: return "cuda";
    }
}

#if VCCL_HAVE_CUDA

namespace {
bool ok(cudaError_t e, const char* what, std::string* error) {
    if (e == cudaSuccess) return true;
    *error = std::string(what) + ": " + cudaGetErrorString(e);
    return false;
}
} // namespace

bool device_select(int local_rank, int* device, std::string* error) {
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count == 0) {
        *error = std::string("-m cuda: no CUDA device is usable here (cudaGetDeviceCount: ") +
                 (e != cudaSuccess ? cudaGetErrorString(e) : "0 devices") + "); use -m host";
        return false;
    }
    int dev = local_rank % count;
    if (!ok(cudaSetDevice(dev), "cudaSetDevice", error)) return false;
    *device = dev;
    return true;
}

namespace {

/* --alloc vmm: CUDA VMM made the way PyTorch's expandable segments make it, so that vccl meets such memory
 * here as it does in a training job: 20 MiB physical allocations with file-descriptor handles, mapped side
 * by side in one reserved range. The driver entry points come from vccl's one table (src/device/driver_api.cc,
 * compiled into this tool as well): the tool links no libcuda. */
const vccl::DriverApi& vmm_api() { return vccl::driver_api(); }

constexpr size_t kVmmPiece = size_t(20) << 20;

struct VmmBuffer {
    size_t size = 0; // reserved and mapped
    std::vector<CUmemGenericAllocationHandle> handles; // one per kVmmPiece
};
/* How each device buffer was made, for device_free (the tool allocates from one thread). */
struct Allocated {
    DeviceAlloc how;
    VmmBuffer vmm; // --alloc vmm
};
std::map<void*, Allocated> g_allocated;

void vmm_release(CUdeviceptr va, const VmmBuffer& b) {
    for (size_t i = 0; i < b.handles.size(); ++i) {
        vmm_api().unmap(va + i * kVmmPiece, kVmmPiece);
        vmm_api().release(b.handles[i]);
    }
    vmm_api().address_free(va, b.size);
}

void* vmm_alloc(size_t bytes, VmmBuffer* out, std::string* error) {
    if (!vmm_api().vmm_ok) {
        *error = "--alloc vmm: the CUDA driver lacks the VMM entry points";
        return nullptr;
    }
    int device = 0;
    cudaGetDevice(&device);
    CUmemAllocationProp prop = {};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = device;
    prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    size_t granularity = 0;
    if (vmm_api().granularity(&granularity, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) != CUDA_SUCCESS ||
        granularity == 0 || kVmmPiece % granularity != 0) {
        *error = "--alloc vmm: the GPU's VMM granularity does not divide 20 MiB";
        return nullptr;
    }
    VmmBuffer b;
    size_t pieces = (bytes + kVmmPiece - 1) / kVmmPiece;
    b.size = (pieces ? pieces : 1) * kVmmPiece;
    CUdeviceptr va = 0;
    if (vmm_api().reserve(&va, b.size, 0, 0, 0) != CUDA_SUCCESS) {
        *error = "--alloc vmm: cuMemAddressReserve failed";
        return nullptr;
    }
    CUmemAccessDesc access = {};
    access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    access.location.id = device;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    for (size_t i = 0; i * kVmmPiece < b.size; ++i) {
        CUmemGenericAllocationHandle h;
        CUdeviceptr at = va + i * kVmmPiece;
        const char* failed = nullptr;
        if (vmm_api().create(&h, kVmmPiece, &prop, 0) != CUDA_SUCCESS) {
            failed = "--alloc vmm: cuMemCreate failed (out of device memory?)";
        } else if (vmm_api().map(at, kVmmPiece, 0, h, 0) != CUDA_SUCCESS) {
            vmm_api().release(h);
            failed = "--alloc vmm: cuMemMap failed";
        } else {
            b.handles.push_back(h);
            if (vmm_api().set_access(at, kVmmPiece, &access, 1) != CUDA_SUCCESS) failed = "--alloc vmm: cuMemSetAccess failed";
        }
        if (failed != nullptr) {
            *error = failed;
            vmm_release(va, b);
            return nullptr;
        }
    }
    *out = b;
    return reinterpret_cast<void*>(va);
}

} // namespace

void* device_alloc(size_t bytes, DeviceAlloc how, std::string* error) {
    void* p = nullptr;
    VmmBuffer vmm;
    switch (how) {
    case DeviceAlloc::Vccl:
        if (vcclMemAlloc(&p, bytes) != vcclSuccess) {
            *error = std::string("--alloc vccl: vcclMemAlloc: ") + vcclGetLastError(nullptr);
            return nullptr;
        }
        break;
    case DeviceAlloc::Vmm:
        p = vmm_alloc(bytes, &vmm, error);
        if (p == nullptr) return nullptr;
        break;
    default:
        if (!ok(cudaMalloc(&p, bytes), "cudaMalloc", error)) return nullptr;
    }
    g_allocated[p] = Allocated{how, vmm};
    return p;
}

void device_free(void* p) {
    if (p == nullptr) return;
    auto it = g_allocated.find(p);
    Allocated a = it != g_allocated.end() ? it->second : Allocated{DeviceAlloc::Cuda, {}};
    if (it != g_allocated.end()) g_allocated.erase(it);
    if (a.how == DeviceAlloc::Vccl) {
        vcclMemFree(p);
    } else if (a.how == DeviceAlloc::Vmm) {
        cudaDeviceSynchronize(); // unmapping does not wait for work still using the memory
        vmm_release(reinterpret_cast<CUdeviceptr>(p), a.vmm);
    } else {
        cudaFree(p);
    }
}

bool device_copy(void* dst, const void* src, size_t bytes, std::string* error) {
    /* A cudaMemcpy from pageable memory may return before its DMA has landed, and the benchmark's stream
     * is non-blocking (it does not wait for the legacy stream that DMA runs on): wait for the device so the
     * next operation reads what was written. */
    return ok(cudaMemcpy(dst, src, bytes, cudaMemcpyDefault), "cudaMemcpy", error) &&
           ok(cudaDeviceSynchronize(), "cudaDeviceSynchronize", error);
}

bool stream_create(void** stream, bool high, std::string* error) {
    int least = 0, greatest = 0;
    if (high && !ok(cudaDeviceGetStreamPriorityRange(&least, &greatest), "cudaDeviceGetStreamPriorityRange", error))
        return false;
    cudaStream_t s = nullptr;
    if (!ok(cudaStreamCreateWithPriority(&s, cudaStreamNonBlocking, high ? greatest : least),
            "cudaStreamCreateWithPriority", error))
        return false;
    *stream = s;
    return true;
}

bool stream_sync(void* stream, std::string* error) {
    return ok(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)), "cudaStreamSynchronize", error);
}

void stream_destroy(void* stream) {
    if (stream != nullptr) cudaStreamDestroy(static_cast<cudaStream_t>(stream));
}

#else // !VCCL_HAVE_CUDA

namespace {
const char kNoCuda[] = "-m cuda: vccl was built without CUDA (configure --with-cuda); use -m host";
}

bool device_select(int, int*, std::string* error) {
    *error = kNoCuda;
    return false;
}
void* device_alloc(size_t, DeviceAlloc, std::string* error) {
    *error = kNoCuda;
    return nullptr;
}
void device_free(void*) {}
bool device_copy(void*, const void*, size_t, std::string* error) {
    *error = kNoCuda;
    return false;
}
bool stream_create(void**, bool, std::string* error) {
    *error = kNoCuda;
    return false;
}
bool stream_sync(void*, std::string*) { return true; }
void stream_destroy(void*) {}

#endif

} // namespace vperf
