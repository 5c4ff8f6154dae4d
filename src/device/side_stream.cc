/* SPDX-License-Identifier: BSD-3-Clause */
#include "device/side_stream.h"

#include "config.h"
#include "core/status.h"

#if VCCL_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "device/device_scope.h"
#include "device/memory.h"
#endif

namespace vccl {

#if VCCL_HAVE_CUDA

namespace {
vcclResult_t check(cudaError_t err, const char* what) { return err == cudaSuccess ? vcclSuccess : cuda_fail(what, err); }
cudaEvent_t ev(void* e) { return static_cast<cudaEvent_t>(e); }
cudaStream_t st(vcclStream_t s) { return static_cast<cudaStream_t>(s); }
} // namespace

SideStream::~SideStream() { release(); }

void SideStream::release() {
    // Neither call waits for the device: CUDA frees a stream's and an event's resources once their work is done.
    for (vcclStream_t& s : by_priority_) {
        if (s != nullptr) cudaStreamDestroy(st(s));
        s = nullptr;
    }
    if (fork_event_ != nullptr) cudaEventDestroy(ev(fork_event_));
    for (void*& m : marks_) {
        if (m != nullptr) cudaEventDestroy(ev(m));
        m = nullptr;
    }
    stream_ = nullptr;
    fork_event_ = nullptr;
    device_ = -1;
}

vcclResult_t SideStream::make_events() {
    cudaEvent_t e = nullptr;
    vcclResult_t r = check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreate");
    fork_event_ = r == vcclSuccess ? e : nullptr;
    for (int i = 0; i < kMarks && r == vcclSuccess; ++i) {
        r = check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreate");
        marks_[i] = r == vcclSuccess ? e : nullptr;
    }
    return r;
}

vcclResult_t SideStream::fork(vcclStream_t main) {
    int device = 0;
    if (!stream_device(main, &device)) return set_last_error(vcclUnhandledCudaError, "cannot tell the stream's GPU");
    if (device_ != -1 && device != device_) release();
    // The caller's priority: kernels of a call on a high-priority stream (what PyTorch can give its
    // communication streams) must not run at the default priority here, behind a GEMM's blocks.
    int priority = 0;
    if (cudaStreamGetPriority(st(main), &priority) != cudaSuccess) {
        cudaGetLastError(); // not sticky; the default priority will do
        priority = 0;
    }
    vcclStream_t& side = by_priority_[priority_slot(priority)];
    if (side == nullptr || fork_event_ == nullptr) {
        DeviceScope scope(device);
        if (side == nullptr) {
            cudaStream_t s = nullptr;
            VCCL_RETURN_IF_ERROR(check(cudaStreamCreateWithPriority(&s, cudaStreamNonBlocking, priority),
                                       "cudaStreamCreateWithPriority (second stream of the communicator)"));
            side = s;
        }
        device_ = device;
        if (fork_event_ == nullptr) {
            vcclResult_t r = make_events();
            if (r != vcclSuccess) {
                release();
                return r;
            }
        }
    }
    stream_ = side;
    VCCL_RETURN_IF_ERROR(check(cudaEventRecord(ev(fork_event_), st(main)), "cudaEventRecord"));
    return check(cudaStreamWaitEvent(st(stream_), ev(fork_event_), 0), "cudaStreamWaitEvent");
}

vcclResult_t SideStream::mark(int slot) {
    if (stream_ == nullptr || slot < 0 || slot >= kMarks) {
        return set_last_error(vcclInternalError, "second stream: mark %d without a stream", slot);
    }
    return check(cudaEventRecord(ev(marks_[slot]), st(stream_)), "cudaEventRecord");
}

vcclResult_t SideStream::wait_mark(vcclStream_t main, int slot) {
    if (stream_ == nullptr || slot < 0 || slot >= kMarks) {
        return set_last_error(vcclInternalError, "second stream: wait for mark %d without a stream", slot);
    }
    return check(cudaStreamWaitEvent(st(main), ev(marks_[slot]), 0), "cudaStreamWaitEvent");
}

vcclResult_t SideStream::join(vcclStream_t main) {
    if (stream_ == nullptr) return vcclSuccess;
    VCCL_RETURN_IF_ERROR(mark(0));
    return wait_mark(main, 0);
}

#else // no CUDA: device memory never reaches here

SideStream::~SideStream() {}
void SideStream::release() {}
vcclResult_t SideStream::fork(vcclStream_t) {
    return set_last_error(vcclInternalError, "second stream used in a build without CUDA");
}
vcclResult_t SideStream::mark(int) { return vcclInternalError; }
vcclResult_t SideStream::wait_mark(vcclStream_t, int) { return vcclInternalError; }
vcclResult_t SideStream::join(vcclStream_t) { return vcclSuccess; }

#endif

} // namespace vccl
