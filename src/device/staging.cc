#include "device/staging.h"

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <thread>

#include "config.h"
#include "core/status.h"

#if VCCL_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "device/driver_entry.h"
#include "device/vmm.h"
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

vcclResult_t copy_device_to_host(void* dst, const void* src, size_t bytes, vcclStream_t stream) {
    return copy(dst, src, bytes, cudaMemcpyDeviceToHost, stream);
}

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
 * shared CUDA's 2 MiB suballocation blocks with the application's buffers and kept those blocks alive after the
 * application freed its buffers, so a peer that still mapped such a block (a communicator torn down with its
 * stream blocked leaves its mappings) could not map a new buffer carved from it ("resource already mapped",
 * 2x H200, run185; with cudaMallocAsync copies before 2faae58 this never happened). */
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

vcclResult_t copy_host_to_device(void* dst, const void* src, size_t bytes, vcclStream_t stream) {
    return copy(dst, src, bytes, cudaMemcpyHostToDevice, stream);
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
                      "cudaMemcpyAsync (copy of an in-place send)");
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

StreamOrder::~StreamOrder() {
    if (event_ != nullptr) cudaEventDestroy(static_cast<cudaEvent_t>(event_)); // released once it completes
}

vcclResult_t StreamOrder::before(const std::vector<vcclStream_t>& streams) {
    if (!recorded_) return vcclSuccess;
    // Also on the same handle: cudaStreamPerThread and the legacy stream name a different stream per thread,
    // and a destroyed stream's handle may come back for a new one. On the same stream the wait costs a call.
    for (vcclStream_t s : streams) {
        VCCL_RETURN_IF_ERROR(cuda_check(cudaStreamWaitEvent(static_cast<cudaStream_t>(s), static_cast<cudaEvent_t>(event_), 0),
                                        "cudaStreamWaitEvent (communicator order)"));
    }
    return vcclSuccess;
}

vcclResult_t StreamOrder::after(const std::vector<vcclStream_t>& streams) {
    if (streams.empty()) return vcclSuccess;
    vcclStream_t last = streams.back();
    for (vcclStream_t s : streams) VCCL_RETURN_IF_ERROR(stream_wait_for(last, s));
    // The event must belong to the stream's device, which need not be the calling thread's current one.
    int current = 0, device = 0;
    VCCL_RETURN_IF_ERROR(cuda_check(cudaGetDevice(&current), "cudaGetDevice"));
    if (cudaStreamGetDevice(static_cast<cudaStream_t>(last), &device) != cudaSuccess) {
        cudaGetLastError();
        device = current;
    }
    if (device != current) VCCL_RETURN_IF_ERROR(cuda_check(cudaSetDevice(device), "cudaSetDevice"));
    vcclResult_t r = vcclSuccess;
    if (event_ != nullptr && event_device_ != device) {
        cudaEventDestroy(static_cast<cudaEvent_t>(event_));
        event_ = nullptr;
    }
    if (event_ == nullptr) {
        cudaEvent_t ev;
        r = cuda_check(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming), "cudaEventCreate");
        if (r == vcclSuccess) {
            event_ = ev;
            event_device_ = device;
        }
    }
    if (r == vcclSuccess) {
        r = cuda_check(cudaEventRecord(static_cast<cudaEvent_t>(event_), static_cast<cudaStream_t>(last)),
                       "cudaEventRecord (communicator order)");
    }
    if (device != current) cudaSetDevice(current);
    VCCL_RETURN_IF_ERROR(r);
    last_ = last;
    recorded_ = true;
    return vcclSuccess;
}

namespace {

/* The teardown threads of run_when_done, and the process's exit. A detached thread that frees GPU memory while
 * the process exits would race CUDA's own teardown (its handlers run at exit too), so the first thread
 * constructs a static guard, whose destructor runs at exit before the CUDA runtime's handlers (registered
 * earlier, run later) and stops them: a thread still waiting for the device frees nothing (the process's exit
 * frees it all), and one already freeing is waited for, up to kExitWaitMs (cudaFree may wait for a GPU that
 * other work keeps busy or blocked). Never destroyed itself: a thread may outlive static destruction. */
struct Teardowns {
    std::mutex mutex;
    std::condition_variable changed;
    int freeing = 0;
    bool exiting = false;
};
Teardowns* g_teardowns = new Teardowns;
Teardowns& teardowns() { return *g_teardowns; }
/* A child of fork has none of the parent's threads, but may inherit a count or a locked mutex: a fresh state. */
void teardowns_after_fork_in_child() { g_teardowns = new Teardowns; }
constexpr int kExitWaitMs = 2000;
struct TeardownExitGuard {
    ~TeardownExitGuard() {
        Teardowns& t = teardowns();
        std::unique_lock<std::mutex> lock(t.mutex);
        t.exiting = true;
        t.changed.wait_for(lock, std::chrono::milliseconds(kExitWaitMs), [&] { return t.freeing == 0; });
    }
};
std::atomic<int> g_hold_teardown_ms{0}; // testing::hold_teardown_ms
bool exiting() {
    Teardowns& t = teardowns();
    std::lock_guard<std::mutex> lock(t.mutex);
    return t.exiting;
}

} // namespace

void StreamOrder::run_when_done(std::function<void()> fn, bool never_now, int fallback_device) {
    cudaEvent_t ev = static_cast<cudaEvent_t>(event_);
    const bool pending = recorded_ && ev != nullptr && cudaEventQuery(ev) == cudaErrorNotReady;
    cudaGetLastError();
    if (!pending && !never_now) {
        fn();
        return;
    }
    if (pending) {
        event_ = nullptr; // the thread owns it now
        recorded_ = false;
    } else {
        ev = nullptr; // nothing to wait for (the event, if any, stays ours)
    }
    // Never the calling thread's current GPU: a watchdog thread that aborts may never have chosen one (0).
    const int device = event_device_ >= 0 ? event_device_ : fallback_device;
    static TeardownExitGuard guard; // constructed with the first thread, after the CUDA runtime's handlers
    static const int fork_handler = pthread_atfork(nullptr, nullptr, teardowns_after_fork_in_child);
    (void)fork_handler;
    // fn moves into the thread, so the last references it holds are dropped there, not here.
    const int hold_ms = g_hold_teardown_ms.load();
    std::thread([ev, fn = std::move(fn), device, hold_ms]() mutable {
        // The communicator's GPU first: a new thread starts on device 0, where the teardown's DeviceScope would
        // return and its cudaFree would run, creating a context on GPU 0 in a process that uses another GPU
        // (memory taken there, and an error where GPUs are in exclusive-process mode).
        if (device >= 0) cudaSetDevice(device);
        // Any other answer (an error, the runtime shutting down at exit) ends the wait as well.
        while (ev != nullptr && cudaEventQuery(ev) == cudaErrorNotReady && !exiting()) {
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
        Teardowns& t = teardowns();
        {
            std::lock_guard<std::mutex> lock(t.mutex);
            if (t.exiting) { // the process exits: free nothing, not even by fn's destructor
                new std::function<void()>(std::move(fn));
                return;
            }
            ++t.freeing;
        }
        if (hold_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(hold_ms));
        fn();
        fn = nullptr; // the references it held go now, inside the count
        if (ev != nullptr) cudaEventDestroy(ev);
        std::lock_guard<std::mutex> lock(t.mutex);
        --t.freeing;
        t.changed.notify_all();
        if (hold_ms > 0) fprintf(stderr, "vccl test hook: a teardown thread finished freeing\n");
    }).detach();
}

namespace testing {
// At most half the exit guard's wait: a hold beyond it would make the test race the exit it is meant to show safe.
void hold_teardown_ms(int ms) { g_hold_teardown_ms.store(std::min(ms, kExitWaitMs / 2)); }
} // namespace testing

#else // no CUDA: device memory never reaches here

void StreamOrder::run_when_done(std::function<void()> fn, bool, int) { fn(); }
namespace testing {
void hold_teardown_ms(int) {}
} // namespace testing

StreamOrder::~StreamOrder() {}
vcclResult_t StreamOrder::before(const std::vector<vcclStream_t>&) { return vcclSuccess; }
vcclResult_t StreamOrder::after(const std::vector<vcclStream_t>&) { return vcclSuccess; }

DeviceScratch::~DeviceScratch() {}

vcclResult_t DeviceScratch::get(size_t, vcclStream_t, void**) {
    return set_last_error(vcclInternalError, "device scratch used in a build without CUDA");
}

StagingBuffer::~StagingBuffer() { free(ptr_); }

vcclResult_t StagingBuffer::get(size_t, void**, int) {
    return set_last_error(vcclInternalError, "device staging used in a build without CUDA");
}

vcclResult_t copy_device_to_host(void*, const void*, size_t, vcclStream_t) {
    return set_last_error(vcclInternalError, "device staging used in a build without CUDA");
}

vcclResult_t copy_host_to_device(void*, const void*, size_t, vcclStream_t) {
    return set_last_error(vcclInternalError, "device staging used in a build without CUDA");
}

vcclResult_t enqueue_staged_copy(char*, const StagedCopy&, bool, vcclStream_t) {
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
