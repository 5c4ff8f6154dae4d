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

/* Makes `device` current for the scope (a communicator's device work runs on its own GPU, whichever is
 * current in the calling thread); a negative `device` changes nothing. */
class DeviceScope {
public:
    explicit DeviceScope(int device) {
        if (device >= 0 && cudaGetDevice(&saved_) == cudaSuccess && saved_ != device) {
            cudaSetDevice(device);
        } else {
            saved_ = -1;
        }
    }
    ~DeviceScope() {
        if (saved_ >= 0) cudaSetDevice(saved_);
    }
    DeviceScope(const DeviceScope&) = delete;
    DeviceScope& operator=(const DeviceScope&) = delete;
private:
    int saved_ = -1;
};

} // namespace vccl

#endif
