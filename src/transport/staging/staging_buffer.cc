/* SPDX-License-Identifier: BSD-3-Clause */
#include "transport/staging/staging_buffer.h"

#include <cstdlib>

#include "config.h"
#include "core/status.h"

#if VCCL_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "device/device_scope.h"
#endif

namespace vccl {

#if VCCL_HAVE_CUDA

namespace {
vcclResult_t cuda_check(cudaError_t err, const char* what) {
    if (err == cudaSuccess) return vcclSuccess;
    return set_last_error(vcclUnhandledCudaError, "%s failed: %s", what, cudaGetErrorString(err));
}
} // namespace

StagingBuffer::~StagingBuffer() {
    if (ptr_ == nullptr) return;
    if (pinned_) {
        cudaFreeHost(ptr_);
    } else {
        free(ptr_);
    }
}

vcclResult_t StagingBuffer::get(size_t bytes, void** out, int device) {
    if (bytes <= bytes_ && ptr_ != nullptr) {
        *out = ptr_;
        return vcclSuccess;
    }
    this->~StagingBuffer();
    ptr_ = nullptr;
    bytes_ = 0;
    size_t want = bytes < 4096 ? 4096 : bytes;
    {
        DeviceScope scope(device);
        pinned_ = cudaMallocHost(&ptr_, want) == cudaSuccess;
    }
    if (!pinned_) {
        cudaGetLastError();
        ptr_ = malloc(want);
        if (ptr_ == nullptr) return set_last_error(vcclSystemError, "cannot allocate %zu bytes of staging memory", want);
    }
    bytes_ = want;
    *out = ptr_;
    return vcclSuccess;
}

vcclResult_t enqueue_staged_copy(char* slot, const StagedCopy& c, bool to_slot, vcclStream_t stream) {
    if (c.bytes == 0 || c.rows == 0) return vcclSuccess;
    cudaStream_t s = static_cast<cudaStream_t>(stream);
    char* host = slot + c.offset;
    char* dev = static_cast<char*>(c.device);
    cudaMemcpyKind kind = to_slot ? cudaMemcpyDeviceToHost : cudaMemcpyHostToDevice;
    if (c.rows == 1) {
        cudaError_t err =
            to_slot ? cudaMemcpyAsync(host, dev, c.bytes, kind, s) : cudaMemcpyAsync(dev, host, c.bytes, kind, s);
        return cuda_check(err, to_slot ? "cudaMemcpyAsync (staging input)" : "cudaMemcpyAsync (staging output)");
    }
    // CUDA rejects pitches over its limit (cudaDevAttrMaxPitch, 2^31 - 1 on current GPUs): blocks of over 2 GiB
    // a rank go row by row.
    const size_t kMaxPitch = 0x7fffffff;
    if (c.device_pitch <= kMaxPitch && c.host_pitch <= kMaxPitch) {
        cudaError_t err =
            to_slot ? cudaMemcpy2DAsync(host, c.host_pitch, dev, c.device_pitch, c.bytes, c.rows, kind, s)
                    : cudaMemcpy2DAsync(dev, c.device_pitch, host, c.host_pitch, c.bytes, c.rows, kind, s);
        return cuda_check(err, to_slot ? "cudaMemcpy2DAsync (staging input)" : "cudaMemcpy2DAsync (staging output)");
    }
    for (size_t i = 0; i < c.rows; ++i) {
        StagedCopy row{dev + i * c.device_pitch, c.offset + i * c.host_pitch, c.bytes};
        VCCL_RETURN_IF_ERROR(enqueue_staged_copy(slot, row, to_slot, stream));
    }
    return vcclSuccess;
}

#else // no CUDA: device memory never reaches here

StagingBuffer::~StagingBuffer() { free(ptr_); }

vcclResult_t StagingBuffer::get(size_t, void**, int) {
    return set_last_error(vcclInternalError, "device staging used in a build without CUDA");
}

vcclResult_t enqueue_staged_copy(char*, const StagedCopy&, bool, vcclStream_t) {
    return set_last_error(vcclInternalError, "device staging used in a build without CUDA");
}

#endif

} // namespace vccl
