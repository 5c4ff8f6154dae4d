/* SPDX-License-Identifier: BSD-3-Clause */
#include "device/memory.h"

#include <algorithm>
#include <chrono>
#include <thread>

#include "config.h"
#include "core/fine_sleeps.h"
#include "core/status.h"

#if VCCL_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace vccl {

MemType mem_type_of(const void* ptr) {
#if VCCL_HAVE_CUDA
    if (ptr == nullptr) return MemType::Host;
    cudaPointerAttributes attr;
    if (cudaPointerGetAttributes(&attr, ptr) == cudaSuccess) {
        return attr.type == cudaMemoryTypeDevice ? MemType::Cuda : MemType::Host;
    }
    cudaGetLastError(); // no driver, no device, or unregistered host memory: clear the sticky-free error
#else
    (void)ptr;
#endif
    return MemType::Host;
}

int device_of(const void* ptr) {
#if VCCL_HAVE_CUDA
    if (ptr == nullptr) return -1;
    cudaPointerAttributes attr;
    if (cudaPointerGetAttributes(&attr, ptr) == cudaSuccess) {
        return attr.type == cudaMemoryTypeDevice ? attr.device : -1;
    }
    cudaGetLastError(); // as in mem_type_of
#else
    (void)ptr;
#endif
    return -1;
}

vcclResult_t stream_synchronize_watching(vcclStream_t stream, bool null_is_legacy,
                                         const std::function<vcclResult_t()>& failed) {
#if VCCL_HAVE_CUDA
    if (stream == nullptr && !null_is_legacy) return vcclSuccess;
    auto st = static_cast<cudaStream_t>(stream);
    const auto start = std::chrono::steady_clock::now();
    auto next_check = start + std::chrono::milliseconds(10);
    for (;;) {
        cudaError_t q = cudaStreamQuery(st);
        if (q == cudaSuccess) return vcclSuccess;
        if (q != cudaErrorNotReady) {
            return set_last_error(vcclUnhandledCudaError, "waiting for a stream failed: %s", cudaGetErrorString(q));
        }
        const auto now = std::chrono::steady_clock::now();
        if (now >= next_check) {
            vcclResult_t r = failed();
            if (r != vcclSuccess) return r;
            next_check = now + std::chrono::milliseconds(10);
        }
        // The first millisecond yields between queries. After it the thread sleeps for a 200th of the time
        // waited so far (5 us to 1 ms, with a fine timer slack), so that a wait ends at most about 0.5% late (a
        // fixed 50 us made a 1-2 ms wait up to 5% late), while a long wait polls less and less often.
        const auto waited = now - start;
        if (waited < std::chrono::milliseconds(1)) {
            std::this_thread::yield();
        } else {
            const auto nap = std::chrono::duration_cast<std::chrono::microseconds>(waited) / 200;
            sleep_finely(std::clamp(nap, std::chrono::microseconds(5), std::chrono::microseconds(1000)));
        }
    }
#else
    (void)failed;
    (void)null_is_legacy;
    if (stream == nullptr) return vcclSuccess;
    return set_last_error(vcclInvalidArgument, "a non-NULL stream was passed but vccl was built without CUDA");
#endif
}

bool stream_device(vcclStream_t stream, int* device) {
#if VCCL_HAVE_CUDA
    if (cudaStreamGetDevice(static_cast<cudaStream_t>(stream), device) == cudaSuccess) return true;
    cudaGetLastError();
    if (cudaGetDevice(device) == cudaSuccess) return true;
    cudaGetLastError();
#else
    (void)stream;
    (void)device;
#endif
    return false;
}

int current_device() {
#if VCCL_HAVE_CUDA
    int device = -1;
    if (cudaGetDevice(&device) == cudaSuccess) return device;
    cudaGetLastError();
#endif
    return -1;
}

bool make_device_current(int device) {
#if VCCL_HAVE_CUDA
    cudaError_t err = cudaSetDevice(device);
    if (err == cudaSuccess) return true;
    cudaGetLastError();
    set_last_error(vcclUnhandledCudaError, "cudaSetDevice(%d): %s", device, cudaGetErrorString(err));
#else
    set_last_error(vcclInvalidArgument, "GPU %d: vccl was built without CUDA", device);
#endif
    return false;
}

bool stream_capturing(vcclStream_t stream) {
#if VCCL_HAVE_CUDA
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    cudaError_t err = cudaStreamIsCapturing(static_cast<cudaStream_t>(stream), &capture);
    if (err == cudaErrorStreamCaptureImplicit) return true;
    if (err != cudaSuccess) cudaGetLastError(); // no device: nothing can be capturing
    return capture != cudaStreamCaptureStatusNone;
#else
    (void)stream;
    return false;
#endif
}

RelaxedCapture::RelaxedCapture() {
#if VCCL_HAVE_CUDA
    cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
    if (cudaThreadExchangeStreamCaptureMode(&mode) == cudaSuccess) saved_ = int(mode);
    else {
        cudaGetLastError();
        saved_ = int(cudaStreamCaptureModeRelaxed);
    }
#endif
}

RelaxedCapture::~RelaxedCapture() {
#if VCCL_HAVE_CUDA
    cudaStreamCaptureMode mode = cudaStreamCaptureMode(saved_);
    if (cudaThreadExchangeStreamCaptureMode(&mode) != cudaSuccess) cudaGetLastError();
#endif
}

#if VCCL_HAVE_CUDA
namespace {
void drop_kept(void* kept) { delete static_cast<std::shared_ptr<void>*>(kept); }
} // namespace
#endif

vcclResult_t stream_capture_keep(vcclStream_t stream, std::shared_ptr<void> keep) {
#if VCCL_HAVE_CUDA
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    cudaGraph_t graph = nullptr;
    cudaError_t err = cudaStreamGetCaptureInfo(static_cast<cudaStream_t>(stream), &status, nullptr, &graph);
    if (err != cudaSuccess || status != cudaStreamCaptureStatusActive || graph == nullptr) {
        cudaGetLastError();
        return set_last_error(vcclInvalidUsage, "the stream's capture is not active (%s): the call was not captured",
                              err != cudaSuccess ? cudaGetErrorString(err) : "invalidated");
    }
    auto* kept = new std::shared_ptr<void>(std::move(keep));
    cudaUserObject_t object = nullptr;
    err = cudaUserObjectCreate(&object, kept, drop_kept, 1, cudaUserObjectNoDestructorSync);
    if (err != cudaSuccess) {
        delete kept;
        cudaGetLastError();
        return set_last_error(vcclUnhandledCudaError, "cudaUserObjectCreate failed: %s", cudaGetErrorString(err));
    }
    // The graph takes the one reference: destroying the graph (and its instances) drops it.
    err = cudaGraphRetainUserObject(graph, object, 1, cudaGraphUserObjectMove);
    if (err != cudaSuccess) {
        cudaUserObjectRelease(object, 1);
        cudaGetLastError();
        return set_last_error(vcclUnhandledCudaError, "cudaGraphRetainUserObject failed: %s", cudaGetErrorString(err));
    }
    return vcclSuccess;
#else
    (void)stream;
    (void)keep;
    return vcclSuccess;
#endif
}

void relax_capture_for_this_thread() {
#if VCCL_HAVE_CUDA
    cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
    if (cudaThreadExchangeStreamCaptureMode(&mode) != cudaSuccess) cudaGetLastError();
#endif
}

std::vector<std::string> device_busids() {
    std::vector<std::string> ids;
#if VCCL_HAVE_CUDA
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess) {
        cudaGetLastError();
        return ids;
    }
    for (int d = 0; d < count; ++d) {
        char busid[32] = {};
        if (cudaDeviceGetPCIBusId(busid, sizeof(busid), d) == cudaSuccess) ids.push_back(busid);
    }
    cudaGetLastError();
#endif
    return ids;
}

} // namespace vccl
