/* Memory entry points: vcclMemAlloc/vcclMemFree and buffer registration (device/registrations.h). */
#include <mutex>
#include <string>
#include <unordered_map>

#include "api/check.h"
#include "config.h"
#include "core/env.h"
#include "core/log.h"
#include "core/status.h"
#include "device/vmm.h"

#if VCCL_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

using namespace vccl;

namespace {

constexpr size_t kBlock = size_t(2) << 20; // CUDA IPC maps cudaMalloc memory by 2 MiB blocks

/* Allocations of vcclMemAlloc, so vcclMemFree can refuse other pointers. */
std::mutex g_alloc_mutex;
std::unordered_map<void*, size_t>& allocations() {
    static auto* m = new std::unordered_map<void*, size_t>(); // never freed: usable from exit handlers
    return *m;
}

} // namespace

extern "C" VCCL_EXPORT vcclResult_t vcclMemAlloc(void** ptr, size_t size) {
    if (ptr == nullptr) return set_last_error(vcclInvalidArgument, "vcclMemAlloc: ptr is NULL");
    *ptr = nullptr;
    if (size == 0) return vcclSuccess;
    if (size > SIZE_MAX - kBlock) return set_last_error(vcclInvalidArgument, "vcclMemAlloc: size %zu is too large", size);
#if VCCL_HAVE_CUDA
    if (env::get_bool(env::kMemVmm)) {
        int device = 0;
        std::string why;
        if (cudaGetDevice(&device) == cudaSuccess && vmm::supported(device, &why)) return vmm::alloc(device, size, ptr);
        cudaGetLastError();
        static std::once_flag once;
        std::call_once(once, [&] {
            VCCL_INFO(kLogDevice, "vcclMemAlloc: CUDA VMM unavailable on device %d (%s): using cudaMalloc", device,
                      why.c_str());
        });
    }
    size_t rounded = (size + kBlock - 1) / kBlock * kBlock;
    void* p = nullptr;
    cudaError_t e = cudaMalloc(&p, rounded);
    if (e != cudaSuccess) {
        cudaGetLastError();
        return set_last_error(vcclUnhandledCudaError, "vcclMemAlloc: cudaMalloc of %zu bytes failed: %s", rounded,
                              cudaGetErrorString(e));
    }
    {
        std::lock_guard<std::mutex> lock(g_alloc_mutex);
        allocations()[p] = rounded;
    }
    *ptr = p;
    return vcclSuccess;
#else
    return set_last_error(vcclUnhandledCudaError, "vcclMemAlloc: vccl was built without CUDA");
#endif
}

extern "C" VCCL_EXPORT vcclResult_t vcclMemFree(void* ptr) {
    if (ptr == nullptr) return vcclSuccess;
    if (vmm::owns(ptr)) return vmm::free(ptr);
    std::lock_guard<std::mutex> lock(g_alloc_mutex);
    auto it = allocations().find(ptr);
    if (it == allocations().end()) {
        return set_last_error(vcclInvalidArgument, "vcclMemFree: %p was not allocated by vcclMemAlloc (or was freed)", ptr);
    }
#if VCCL_HAVE_CUDA
    cudaError_t e = cudaFree(ptr);
    if (e != cudaSuccess) { // still allocated as far as CUDA is concerned: the caller may try again
        cudaGetLastError();
        return set_last_error(vcclUnhandledCudaError, "vcclMemFree: cudaFree(%p) failed: %s", ptr, cudaGetErrorString(e));
    }
#endif
    allocations().erase(it);
    return vcclSuccess;
}

extern "C" VCCL_EXPORT vcclResult_t vcclCommRegister(const vcclComm_t comm, void* buff, size_t size, void** handle) {
    VCCL_RETURN_IF_ERROR(check_comm(comm, "vcclCommRegister"));
    if (handle == nullptr) return set_last_error(vcclInvalidArgument, "vcclCommRegister: handle is NULL");
    VCCL_RETURN_IF_ERROR(check_buffer(buff, size, "buff", "vcclCommRegister"));
    if (size > 0 && reinterpret_cast<uintptr_t>(buff) > UINTPTR_MAX - size) {
        return set_last_error(vcclInvalidArgument, "vcclCommRegister: buff %p + size %zu wraps around", buff, size);
    }
    vcclComm* c = const_cast<vcclComm*>(comm);
    std::lock_guard<std::mutex> lock(c->op_mutex);
    return c->dev.registrations.add(buff, size, c->dev.ipc.get(), handle);
}

extern "C" VCCL_EXPORT vcclResult_t vcclCommDeregister(const vcclComm_t comm, void* handle) {
    VCCL_RETURN_IF_ERROR(check_comm(comm, "vcclCommDeregister"));
    vcclComm* c = const_cast<vcclComm*>(comm);
    std::lock_guard<std::mutex> lock(c->op_mutex);
    return c->dev.registrations.remove(handle);
}
