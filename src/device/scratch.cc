/* SPDX-License-Identifier: BSD-3-Clause */
#include "device/scratch.h"

#include <algorithm>

#include "config.h"
#include "core/status.h"

#if VCCL_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "device/vmm.h"
#endif

namespace vccl {

#if VCCL_HAVE_CUDA

namespace {
vcclResult_t cuda_check(cudaError_t err, const char* what) {
    if (err == cudaSuccess) return vcclSuccess;
    return set_last_error(vcclUnhandledCudaError, "%s failed: %s", what, cudaGetErrorString(err));
}
} // namespace

DeviceScratch::~DeviceScratch() {
    // cudaFree and vmm::free wait for work still using them (the teardown runs this once the communicator's work
    // has run). An object moved from (the teardown's) holds nothing.
    if (ptr_ != nullptr) release(ptr_);
    for (void* p : outgrown_) release(p);
}

void DeviceScratch::release(void* p) {
    if (vmm::owns(p)) {
        if (vmm::free(p) != vcclSuccess) cudaGetLastError();
    } else {
        cudaFree(p);
    }
}

/* LocalOnly blocks come from VMM, in an address range of their own, when the GPU allows: kept cudaMalloc blocks
 * would share CUDA's 2 MiB suballocation blocks with the application's buffers and keep those blocks alive after
 * the application freed its buffers, so a peer that still mapped such a block (a communicator torn down with its
 * stream blocked leaves its mappings) could not map a new buffer carved from it ("resource already mapped" on
 * 2x H200; per-call cudaMallocAsync copies come from the stream-ordered pool and do not meet this). */
vcclResult_t DeviceScratch::allocate(size_t want, void** out) {
    *out = nullptr;
    int device = -1;
    if (use_ == Use::LocalOnly && cudaGetDevice(&device) == cudaSuccess && vmm::supported(device, nullptr) &&
        vmm::alloc(device, want, out) == vcclSuccess) {
        return vcclSuccess;
    }
    cudaGetLastError();
    return cuda_check(cudaMalloc(out, want), "cudaMalloc (device scratch)");
}

vcclResult_t DeviceScratch::get(size_t bytes, vcclStream_t stream, void** out) {
    if (ptr_ != nullptr && bytes <= bytes_) {
        *out = ptr_;
        return vcclSuccess;
    }
    if (ptr_ != nullptr && use_ == Use::MappedByPeers) {
        // Earlier operations on the stream may still use the old block; peers' mappings of it go with it.
        VCCL_RETURN_IF_ERROR(cuda_check(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)), "cudaStreamSynchronize"));
        cudaFree(ptr_);
        ptr_ = nullptr;
        bytes_ = 0;
    }
    size_t want = use_ == Use::MappedByPeers ? std::max(bytes, size_t(1) << 20)
                                              : std::max({bytes, size_t(1) << 20, 2 * bytes_});
    void* fresh = nullptr;
    VCCL_RETURN_IF_ERROR(allocate(want, &fresh));
    if (ptr_ != nullptr) outgrown_.push_back(ptr_); // LocalOnly: queued work may still read it
    ptr_ = fresh;
    bytes_ = want;
    *out = ptr_;
    return vcclSuccess;
}

#else // no CUDA: device memory never reaches here

DeviceScratch::~DeviceScratch() {}

vcclResult_t DeviceScratch::get(size_t, vcclStream_t, void**) {
    return set_last_error(vcclInternalError, "device scratch used in a build without CUDA");
}

#endif

} // namespace vccl
