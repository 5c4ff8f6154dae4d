/*
 * CUDA-only helpers of the device files: driver calls without linking libcuda (entry points come from the
 * runtime, cudaGetDriverEntryPointByVersion, so libvccl loads where no driver is installed), error
 * conversion, and a scope that makes a communicator's GPU current. CUDA builds only.
 */
#ifndef VCCL_DEVICE_DRIVER_ENTRY_H_
#define VCCL_DEVICE_DRIVER_ENTRY_H_

#include <cuda.h>
#include <cuda_runtime_api.h>

#include "core/status.h"

namespace vccl {

/* Sets *fn to the driver's `name` (the CUDA 12.0 version of it); false and NULL when there is none. */
template <typename Fn> bool load_driver_entry(const char* name, Fn* fn) {
    cudaDriverEntryPointQueryResult q;
    if (cudaGetDriverEntryPointByVersion(name, reinterpret_cast<void**>(fn), 12000, cudaEnableDefault, &q) !=
            cudaSuccess ||
        q != cudaDriverEntryPointSuccess) {
        cudaGetLastError();
        *fn = nullptr;
        return false;
    }
    return true;
}

/* vcclUnhandledCudaError with "WHAT failed: CUDA driver error N". */
inline vcclResult_t cu_fail(const char* what, CUresult res) {
    return set_last_error(vcclUnhandledCudaError, "%s failed: CUDA driver error %d", what, int(res));
}

/* vcclUnhandledCudaError with "WHAT failed: <the runtime's description>". */
inline vcclResult_t cuda_fail(const char* what, cudaError_t err) {
    return set_last_error(vcclUnhandledCudaError, "%s failed: %s", what, cudaGetErrorString(err));
}

/* The driver's cuCtxGetCurrent and cuCtxSetCurrent, loaded once; NULL where the driver has none. */
struct ContextEntries {
    CUresult (*get)(CUcontext*) = nullptr;
    CUresult (*set)(CUcontext) = nullptr;
};
inline const ContextEntries& context_entries() {
    static const ContextEntries e = [] {
        ContextEntries c;
        if (!load_driver_entry("cuCtxGetCurrent", &c.get) || !load_driver_entry("cuCtxSetCurrent", &c.set)) c = {};
        return c;
    }();
    return e;
}

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
        const ContextEntries& ctx = context_entries();
        CUcontext current = nullptr;
        if (ctx.get != nullptr && ctx.set != nullptr && ctx.get(&current) == CUDA_SUCCESS && current == nullptr) {
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
            context_entries().set(nullptr);
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
