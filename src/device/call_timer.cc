/* SPDX-License-Identifier: BSD-3-Clause */
#include "device/call_timer.h"

#include "config.h"

#if VCCL_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "device/device_scope.h"
#endif

namespace vccl {

#if VCCL_HAVE_CUDA

namespace {
cudaEvent_t ev(void* e) { return static_cast<cudaEvent_t>(e); }
cudaStream_t st(vcclStream_t s) { return static_cast<cudaStream_t>(s); }
} // namespace

bool CallTimer::begin(vcclStream_t stream, uint8_t kind, int device) {
    timing_ = false;
    if (kind >= kKinds || calls_[kind]++ % kSample != kPhase || pending_.size() >= kMaxPending) return false;
    if (device != device_) release(); // events of another GPU cannot be recorded on this one's streams
    device_ = device;
    DeviceScope scope(device);
    if (!free_.empty()) {
        current_ = free_.back();
        free_.pop_back();
    } else {
        current_ = Pair();
        cudaEvent_t a = nullptr, b = nullptr;
        if (cudaEventCreate(&a) != cudaSuccess || cudaEventCreate(&b) != cudaSuccess) {
            if (a != nullptr) cudaEventDestroy(a);
            cudaGetLastError();
            return false;
        }
        current_.start = a;
        current_.stop = b;
    }
    if (cudaEventRecord(ev(current_.start), st(stream)) != cudaSuccess) {
        cudaGetLastError();
        free_.push_back(current_);
        return false;
    }
    current_.kind = kind;
    timing_ = true;
    return true;
}

void CallTimer::end(vcclStream_t stream, bool ok) {
    if (!timing_) return;
    DeviceScope scope(device_);
    timing_ = false;
    if (!ok || cudaEventRecord(ev(current_.stop), st(stream)) != cudaSuccess) {
        cudaGetLastError();
        free_.push_back(current_); // a later record replaces the start's
        return;
    }
    pending_.push_back(current_);
}

void CallTimer::poll(const std::function<void(uint8_t, uint64_t)>& fn) {
    for (size_t i = 0; i < pending_.size();) {
        const Pair p = pending_[i];
        cudaError_t q = cudaEventQuery(ev(p.stop));
        if (q == cudaErrorNotReady) {
            ++i;
            continue;
        }
        float ms = 0;
        if (q == cudaSuccess && cudaEventElapsedTime(&ms, ev(p.start), ev(p.stop)) == cudaSuccess && ms > 0) {
            fn(p.kind, uint64_t(double(ms) * 1e6 * kSample));
        }
        cudaGetLastError();
        free_.push_back(p);
        pending_.erase(pending_.begin() + long(i));
    }
}

void CallTimer::release() {
    for (std::vector<Pair>* list : {&pending_, &free_}) {
        for (const Pair& p : *list) {
            cudaEventDestroy(ev(p.start));
            cudaEventDestroy(ev(p.stop));
        }
        list->clear();
    }
    if (timing_) {
        cudaEventDestroy(ev(current_.start));
        cudaEventDestroy(ev(current_.stop));
        timing_ = false;
    }
    cudaGetLastError();
}

#else

bool CallTimer::begin(vcclStream_t, uint8_t, int) { return false; }
void CallTimer::end(vcclStream_t, bool) {}
void CallTimer::poll(const std::function<void(uint8_t, uint64_t)>&) {}
void CallTimer::release() {}

#endif

} // namespace vccl
