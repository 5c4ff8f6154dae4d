/* SPDX-License-Identifier: BSD-3-Clause */
#include "device/copies.h"

#include "config.h"
#include "core/status.h"

#if VCCL_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace vccl {

#if VCCL_HAVE_CUDA

namespace {
vcclResult_t cuda_check(cudaError_t err, const char* what) {
    if (err == cudaSuccess) return vcclSuccess;
    return set_last_error(vcclUnhandledCudaError, "%s failed: %s", what, cudaGetErrorString(err));
}

vcclResult_t copy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind, vcclStream_t stream) {
    if (bytes == 0) return vcclSuccess;
    cudaStream_t s = static_cast<cudaStream_t>(stream);
    VCCL_RETURN_IF_ERROR(cuda_check(cudaMemcpyAsync(dst, src, bytes, kind, s), "cudaMemcpyAsync"));
    return cuda_check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
}
} // namespace

vcclResult_t copy_device_to_host(void* dst, const void* src, size_t bytes, vcclStream_t stream) {
    return copy(dst, src, bytes, cudaMemcpyDeviceToHost, stream);
}

vcclResult_t copy_host_to_device(void* dst, const void* src, size_t bytes, vcclStream_t stream) {
    return copy(dst, src, bytes, cudaMemcpyHostToDevice, stream);
}

vcclResult_t read_device_bytes(void* dst, const void* src, size_t bytes, vcclStream_t stream) {
    cudaStream_t s = static_cast<cudaStream_t>(stream);
    cudaStream_t own = nullptr;
    if (s == nullptr) {
        VCCL_RETURN_IF_ERROR(cuda_check(cudaStreamCreateWithFlags(&own, cudaStreamNonBlocking), "cudaStreamCreate"));
        s = own;
    }
    vcclResult_t r = cuda_check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, s), "cudaMemcpyAsync");
    if (r == vcclSuccess) r = cuda_check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
    if (own != nullptr) cudaStreamDestroy(own);
    return r;
}

vcclResult_t copy_device_to_device(void* dst, const void* src, size_t bytes, vcclStream_t stream) {
    if (bytes == 0) return vcclSuccess;
    return cuda_check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, static_cast<cudaStream_t>(stream)),
                      "cudaMemcpyAsync (device to device)");
}

vcclResult_t stream_wait_for(vcclStream_t waiter, vcclStream_t signaller) {
    if (waiter == signaller) return vcclSuccess;
    cudaEvent_t ev;
    VCCL_RETURN_IF_ERROR(cuda_check(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming), "cudaEventCreate"));
    vcclResult_t r = cuda_check(cudaEventRecord(ev, static_cast<cudaStream_t>(signaller)), "cudaEventRecord");
    if (r == vcclSuccess) {
        r = cuda_check(cudaStreamWaitEvent(static_cast<cudaStream_t>(waiter), ev, 0), "cudaStreamWaitEvent");
    }
    cudaEventDestroy(ev); // released once the recorded work completes
    return r;
}

#else // no CUDA: device memory never reaches here

vcclResult_t copy_device_to_host(void*, const void*, size_t, vcclStream_t) {
    return set_last_error(vcclInternalError, "device staging used in a build without CUDA");
}

vcclResult_t copy_host_to_device(void*, const void*, size_t, vcclStream_t) {
    return set_last_error(vcclInternalError, "device staging used in a build without CUDA");
}

vcclResult_t read_device_bytes(void*, const void*, size_t, vcclStream_t) {
    return set_last_error(vcclInternalError, "device memory read in a build without CUDA");
}

vcclResult_t copy_device_to_device(void*, const void*, size_t, vcclStream_t) {
    return set_last_error(vcclInternalError, "device copy used in a build without CUDA");
}

vcclResult_t stream_wait_for(vcclStream_t, vcclStream_t) { return vcclSuccess; }

#endif

} // namespace vccl
