/* SPDX-License-Identifier: BSD-3-Clause */
#include "config.h"

#if VCCL_HAVE_CUDA

#include "device/driver_api.h"

namespace vccl {

namespace {

/* Sets *fn to the driver's `name`; false and NULL when there is none. */
template <typename Fn> bool load(const char* name, Fn* fn) {
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

DriverApi load_all() {
    DriverApi a;
    a.memops_ok = load("cuStreamWaitValue32", &a.wait_value) && load("cuStreamWriteValue32", &a.write_value);
    load("cuStreamBatchMemOp", &a.batch_mem_op);
    a.ctx_ok = load("cuCtxGetCurrent", &a.ctx_get) && load("cuCtxSetCurrent", &a.ctx_set);
    load("cuMemGetAddressRange", &a.address_range);
    a.vmm_ok = load("cuDeviceGet", &a.device_get) && load("cuDeviceGetAttribute", &a.device_attribute) &&
               load("cuMemGetAllocationGranularity", &a.granularity) && load("cuMemCreate", &a.create) &&
               load("cuMemRelease", &a.release) && load("cuMemAddressReserve", &a.reserve) &&
               load("cuMemAddressFree", &a.address_free) && load("cuMemMap", &a.map) && load("cuMemUnmap", &a.unmap) &&
               load("cuMemSetAccess", &a.set_access) && load("cuMemExportToShareableHandle", &a.export_handle) &&
               load("cuMemImportFromShareableHandle", &a.import_handle);
    a.vmm_foreign_ok = a.vmm_ok && a.address_range != nullptr && load("cuMemRetainAllocationHandle", &a.retain) &&
                       load("cuPointerGetAttribute", &a.pointer_attribute);
    return a;
}

} // namespace

const DriverApi& driver_api() {
    static const DriverApi api = load_all();
    return api;
}

} // namespace vccl

#endif
