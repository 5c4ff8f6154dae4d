/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The CUDA driver entry points vccl calls, in one table looked up once through the runtime
 * (cudaGetDriverEntryPointByVersion, the CUDA 12.0 version of each): vccl links no libcuda, so it loads where no
 * driver is installed. Each group has its own flag, since a driver may lack one group and not the others. Also the
 * error conversions of the device files. CUDA builds only.
 */
#ifndef VCCL_DEVICE_DRIVER_API_H_
#define VCCL_DEVICE_DRIVER_API_H_

#include <cuda.h>
#include <cuda_runtime_api.h>

#include "core/status.h"

namespace vccl {

struct DriverApi {
    using StreamValueFn = CUresult (*)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);
    using BatchMemOpFn = CUresult (*)(CUstream, unsigned int, CUstreamBatchMemOpParams*, unsigned int);

    // Stream memory operations: the direct path's flags, the staged queue's DONE word.
    StreamValueFn wait_value = nullptr;
    StreamValueFn write_value = nullptr;
    BatchMemOpFn batch_mem_op = nullptr; // optional: several memory operations for the price of one call
    bool memops_ok = false;              // wait_value and write_value
    // Contexts: DeviceScope (device/device_scope.h).
    decltype(&cuCtxGetCurrent) ctx_get = nullptr;
    decltype(&cuCtxSetCurrent) ctx_set = nullptr;
    bool ctx_ok = false;
    // Allocations: the base and size of the one holding a pointer (CUDA IPC exports whole allocations).
    decltype(&cuMemGetAddressRange) address_range = nullptr;
    // VMM (device/vmm.h): exportable allocations and their file descriptors.
    decltype(&cuDeviceGet) device_get = nullptr;
    decltype(&cuDeviceGetAttribute) device_attribute = nullptr;
    decltype(&cuMemGetAllocationGranularity) granularity = nullptr;
    decltype(&cuMemCreate) create = nullptr;
    decltype(&cuMemRelease) release = nullptr;
    decltype(&cuMemAddressReserve) reserve = nullptr;
    decltype(&cuMemAddressFree) address_free = nullptr;
    decltype(&cuMemMap) map = nullptr;
    decltype(&cuMemUnmap) unmap = nullptr;
    decltype(&cuMemSetAccess) set_access = nullptr;
    decltype(&cuMemExportToShareableHandle) export_handle = nullptr;
    decltype(&cuMemImportFromShareableHandle) import_handle = nullptr;
    bool vmm_ok = false;
    // VMM memory other allocators made (vmm::find_foreign).
    decltype(&cuMemRetainAllocationHandle) retain = nullptr;
    decltype(&cuPointerGetAttribute) pointer_attribute = nullptr;
    bool vmm_foreign_ok = false; // with vmm_ok and address_range
};

/* The table, filled on first use (thread safe). */
const DriverApi& driver_api();

/* vcclUnhandledCudaError with "WHAT failed: CUDA driver error N". */
inline vcclResult_t cu_fail(const char* what, CUresult res) {
    return set_last_error(vcclUnhandledCudaError, "%s failed: CUDA driver error %d", what, int(res));
}

/* vcclUnhandledCudaError with "WHAT failed: <the runtime's description>". */
inline vcclResult_t cuda_fail(const char* what, cudaError_t err) {
    return set_last_error(vcclUnhandledCudaError, "%s failed: %s", what, cudaGetErrorString(err));
}

} // namespace vccl

#endif
