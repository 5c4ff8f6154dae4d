/* SPDX-License-Identifier: BSD-3-Clause */
/* A scope that makes a communicator's GPU current, leaving the calling thread as it found it. CUDA builds only. */
#ifndef VCCL_DEVICE_DEVICE_SCOPE_H_
#define VCCL_DEVICE_DEVICE_SCOPE_H_

#include <cuda.h>
#include <cuda_runtime_api.h>

#include "device/driver_api.h"

namespace vccl {

/* Makes `device` current for the scope (a communicator's device work runs on its own GPU, whichever is
 * current in the calling thread); a negative `device` changes nothing. A thread with no CUDA context yet (a
 * framework's watchdog or monitoring thread calling vcclCommGetAsyncError or vcclCommGetTelemetry) reports
 * device 0 without having used it: it gets no context back, as it was, instead of device 0, which would create
 * a context on GPU 0 in a process that uses another GPU (memory taken there, and an error where GPUs are in
 * exclusive-process mode). */
class DeviceScope {
public:
    explicit DeviceScope(int device) {
        if (device < 0) return;
        // The context first: on such a thread even cudaGetDevice is not asked (it could bind device 0's).
        const DriverApi& api = driver_api();
        CUcontext current = nullptr;
        if (api.ctx_ok && api.ctx_get(&current) == CUDA_SUCCESS && current == nullptr) {
            no_context_ = true;
            saved_ = device;
            cudaSetDevice(device);
            return;
        }
        if (cudaGetDevice(&saved_) != cudaSuccess || saved_ == device) {
            saved_ = -1;
            return;
        }
        cudaSetDevice(device);
    }
    ~DeviceScope() {
        if (saved_ < 0) return;
        if (no_context_) {
            driver_api().ctx_set(nullptr);
        } else {
            cudaSetDevice(saved_);
        }
    }
    DeviceScope(const DeviceScope&) = delete;
    DeviceScope& operator=(const DeviceScope&) = delete;
private:
    int saved_ = -1;
    bool no_context_ = false; // the thread had no current context: restore that, not device saved_
};

} // namespace vccl

#endif
