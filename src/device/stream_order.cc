/* SPDX-License-Identifier: BSD-3-Clause */
#include "device/stream_order.h"

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <thread>

#include "config.h"
#include "core/status.h"
#include "core/test_point.h"
#include "device/copies.h"
#include "device/memory.h"

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
} // namespace

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
bool exiting() {
    Teardowns& t = teardowns();
    std::lock_guard<std::mutex> lock(t.mutex);
    return t.exiting;
}
/* Constructed by the first thread that needs it, after the CUDA runtime's handlers. */
void ensure_exit_guard() {
    static TeardownExitGuard guard;
    static const int fork_handler = pthread_atfork(nullptr, nullptr, teardowns_after_fork_in_child);
    (void)fork_handler;
}

} // namespace

bool begin_exit_guarded_work() {
    ensure_exit_guard();
    Teardowns& t = teardowns();
    std::lock_guard<std::mutex> lock(t.mutex);
    if (t.exiting) return false;
    ++t.freeing;
    return true;
}

void end_exit_guarded_work() {
    Teardowns& t = teardowns();
    std::lock_guard<std::mutex> lock(t.mutex);
    --t.freeing;
    t.changed.notify_all();
}

bool process_exiting() { return exiting(); }

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
    ensure_exit_guard();
    // fn moves into the thread, so the last references it holds are dropped there, not here.
    // A test holds the thread to show that the process's exit waits for it; at most half the exit guard's wait, or
    // the test would race the exit it is meant to show safe.
    const int hold_ms = int(std::min<long long>(test_point(nullptr, TestPoint::TeardownHoldMs), kExitWaitMs / 2));
    std::thread([ev, fn = std::move(fn), device, hold_ms]() mutable {
        relax_capture_for_this_thread(); // its CUDA calls must not invalidate a capture in global mode elsewhere
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
        if (hold_ms > 0) fprintf(stderr, "vccl test point: a teardown thread finished freeing\n");
    }).detach();
}

#else // no CUDA: device memory never reaches here

void StreamOrder::run_when_done(std::function<void()> fn, bool, int) { fn(); }
bool begin_exit_guarded_work() { return true; }
void end_exit_guarded_work() {}
bool process_exiting() { return false; }

StreamOrder::~StreamOrder() {}
vcclResult_t StreamOrder::before(const std::vector<vcclStream_t>&) { return vcclSuccess; }
vcclResult_t StreamOrder::after(const std::vector<vcclStream_t>&) { return vcclSuccess; }

#endif

} // namespace vccl
