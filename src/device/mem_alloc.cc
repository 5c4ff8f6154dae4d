/* SPDX-License-Identifier: BSD-3-Clause */
#include "device/mem_alloc.h"

#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>

#include "config.h"
#include "core/env.h"
#include "core/log.h"
#include "core/status.h"
#include "device/vmm.h"

#if VCCL_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace vccl {

namespace {

constexpr size_t kBlock = size_t(2) << 20; // CUDA IPC maps cudaMalloc memory by 2 MiB blocks

/* Allocations of vcclMemAlloc, so vcclMemFree can refuse other pointers. */
std::mutex g_alloc_mutex;
std::unordered_map<void*, size_t>& allocations() {
    static auto* m = new std::unordered_map<void*, size_t>(); // never freed: usable from exit handlers
    return *m;
}

} // namespace

vcclResult_t mem_alloc(size_t size, void** ptr) {
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

vcclResult_t mem_free(void* ptr) {
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

} // namespace vccl
