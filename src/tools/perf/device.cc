/* vccl-perf: the few CUDA runtime calls behind -m cuda. Without CUDA they report that it is missing. */
#include "config.h"
#include "tools/perf/perf.h"

#if VCCL_HAVE_CUDA
#include <cuda_runtime.h>
#endif

namespace vperf {

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

void* device_alloc(size_t bytes, std::string* error) {
    void* p = nullptr;
    if (!ok(cudaMalloc(&p, bytes), "cudaMalloc", error)) return nullptr;
    return p;
}

void device_free(void* p) {
    if (p != nullptr) cudaFree(p);
}

bool device_copy(void* dst, const void* src, size_t bytes, std::string* error) {
    /* A cudaMemcpy from pageable memory may return before its DMA has landed, and the benchmark's stream
     * is non-blocking (it does not wait for the legacy stream that DMA runs on): wait for the device so the
     * next operation reads what was written. */
    return ok(cudaMemcpy(dst, src, bytes, cudaMemcpyDefault), "cudaMemcpy", error) &&
           ok(cudaDeviceSynchronize(), "cudaDeviceSynchronize", error);
}

bool stream_create(void** stream, std::string* error) {
    cudaStream_t s = nullptr;
    if (!ok(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate", error)) return false;
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
void* device_alloc(size_t, std::string* error) {
    *error = kNoCuda;
    return nullptr;
}
void device_free(void*) {}
bool device_copy(void*, const void*, size_t, std::string* error) {
    *error = kNoCuda;
    return false;
}
bool stream_create(void**, std::string* error) {
    *error = kNoCuda;
    return false;
}
bool stream_sync(void*, std::string*) { return true; }
void stream_destroy(void*) {}

#endif

} // namespace vperf
