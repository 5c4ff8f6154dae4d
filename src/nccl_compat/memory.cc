/*
 * libvccl-nccl: memory. ncclMemAlloc/ncclMemFree are plain cudaMalloc/cudaFree. Buffer registration is a
 * no-op for now: ncclCommRegister hands back a handle that only ncclCommDeregister (on the same
 * communicator) accepts; vccl's data path does not need registered buffers, and ncclCommWindowRegister
 * (symmetric memory) is not supported.
 */
#include <new>

#include "config.h"
#include "nccl_compat/compat.h"

#if VCCL_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

using namespace vccl::nccl_compat;

namespace {
struct Registration {
    const ncclComm* comm;
    void* buff;
    size_t size;
};
} // namespace

extern "C" {

VNCCL_API(ncclResult_t, ncclMemAlloc, void** ptr, size_t size) {
    if (ptr == nullptr) return fail(ncclInvalidArgument, "ncclMemAlloc: ptr is NULL");
#if VCCL_HAVE_CUDA
    void* p = nullptr;
    cudaError_t e = cudaMalloc(&p, size);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return fail(ncclUnhandledCudaError, "ncclMemAlloc: cudaMalloc(%zu) failed: %s", size, cudaGetErrorString(e));
    }
    *ptr = p;
    return ncclSuccess;
#else
    return unsupported("ncclMemAlloc", "built without CUDA");
#endif
}

VNCCL_API(ncclResult_t, ncclMemFree, void* ptr) {
    if (ptr == nullptr) return ncclSuccess;
#if VCCL_HAVE_CUDA
    cudaError_t e = cudaFree(ptr);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return fail(ncclUnhandledCudaError, "ncclMemFree: cudaFree(%p) failed: %s", ptr, cudaGetErrorString(e));
    }
    return ncclSuccess;
#else
    return unsupported("ncclMemFree", "built without CUDA");
#endif
}

VNCCL_API(ncclResult_t, ncclCommRegister, const ncclComm_t comm, void* buff, size_t size, void** handle) {
    vcclComm_t vc = nullptr;
    ncclResult_t r = lookup(comm, "ncclCommRegister", &vc);
    if (r != ncclSuccess) return r;
    if (handle == nullptr) return fail(ncclInvalidArgument, "ncclCommRegister: handle is NULL");
    if (buff == nullptr && size != 0) return fail(ncclInvalidArgument, "ncclCommRegister: buff is NULL");
    auto* reg = static_cast<Registration*>(::operator new(sizeof(Registration), std::nothrow));
    if (reg == nullptr) return fail(ncclSystemError, "ncclCommRegister: out of memory");
    *reg = Registration{comm, buff, size};
    {
        std::lock_guard<std::mutex> lock(comm->reg_mutex);
        comm->registrations.insert(reg);
    }
    *handle = reg;
    return ncclSuccess;
}

VNCCL_API(ncclResult_t, ncclCommDeregister, const ncclComm_t comm, void* handle) {
    vcclComm_t vc = nullptr;
    ncclResult_t r = lookup(comm, "ncclCommDeregister", &vc);
    if (r != ncclSuccess) return r;
    {
        std::lock_guard<std::mutex> lock(comm->reg_mutex);
        if (handle == nullptr || comm->registrations.erase(handle) == 0) {
            return fail(ncclInvalidArgument, "ncclCommDeregister: %p is not a registration of this communicator",
                        handle);
        }
    }
    ::operator delete(handle);
    return ncclSuccess;
}

VNCCL_API(ncclResult_t, ncclCommWindowRegister, ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win,
          int winFlags) {
    return unsupported("ncclCommWindowRegister", "no symmetric memory windows; use ncclCommRegister or none");
}

VNCCL_API(ncclResult_t, ncclCommWindowDeregister, ncclComm_t comm, ncclWindow_t win) {
    return unsupported("ncclCommWindowDeregister", "no symmetric memory windows");
}

/* The device-side API (kernels that talk to peers through NCCL's device communicator) has no vccl
 * counterpart: its callers get a clear refusal instead of a missing symbol at load time. */
VNCCL_API(ncclResult_t, ncclDevCommCreate, ncclComm_t comm, const ncclDevCommRequirements_t* reqs,
          ncclDevComm_t* outDevComm) {
    return unsupported("ncclDevCommCreate", "no NCCL device API (kernels using ncclDevComm)");
}

VNCCL_API(ncclResult_t, ncclDevCommDestroy, ncclComm_t comm, const ncclDevComm_t* devComm) {
    return unsupported("ncclDevCommDestroy", "no NCCL device API");
}

} // extern "C"
