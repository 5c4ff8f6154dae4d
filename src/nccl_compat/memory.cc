/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * libvccl-nccl: memory. ncclMemAlloc/ncclMemFree and ncclCommRegister/ncclCommDeregister are vccl's
 * (vcclMemAlloc: CUDA IPC exportable device memory in whole 2 MiB blocks; registration caches a buffer's
 * export for direct transfers). Windows (ncclCommWindowRegister) are in windows.cc.
 */
#include "nccl_compat/compat.h"

using namespace vccl::nccl_compat;

extern "C" {

VNCCL_API(ncclResult_t, ncclMemAlloc, void** ptr, size_t size) {
    if (ptr == nullptr) return fail(ncclInvalidArgument, "ncclMemAlloc: ptr is NULL");
    vcclResult_t r = vcclMemAlloc(ptr, size);
    if (r != vcclSuccess) return fail(to_nccl(r), "%s", vcclGetLastError(nullptr));
    return ncclSuccess;
}

VNCCL_API(ncclResult_t, ncclMemFree, void* ptr) {
    vcclResult_t r = vcclMemFree(ptr);
    if (r != vcclSuccess) return fail(to_nccl(r), "%s", vcclGetLastError(nullptr));
    return ncclSuccess;
}

VNCCL_API(ncclResult_t, ncclCommRegister, const ncclComm_t comm, void* buff, size_t size, void** handle) {
    vcclComm_t vc = nullptr;
    ncclResult_t r = lookup(comm, "ncclCommRegister", &vc);
    if (r != ncclSuccess) return r;
    vcclResult_t v = vcclCommRegister(vc, buff, size, handle);
    if (v != vcclSuccess) return fail(to_nccl(v), "%s", vcclGetLastError(vc));
    return ncclSuccess;
}

VNCCL_API(ncclResult_t, ncclCommDeregister, const ncclComm_t comm, void* handle) {
    vcclComm_t vc = nullptr;
    ncclResult_t r = lookup(comm, "ncclCommDeregister", &vc);
    if (r != ncclSuccess) return r;
    vcclResult_t v = vcclCommDeregister(vc, handle);
    if (v != vcclSuccess) return fail(to_nccl(v), "%s", vcclGetLastError(vc));
    return ncclSuccess;
}

/* The device-side API (kernels that talk to peers through NCCL's device communicator) has no vccl
 * counterpart: its callers get a clear refusal instead of a missing symbol at load time. */
VNCCL_API(ncclResult_t, ncclDevCommCreate, ncclComm_t comm, const ncclDevCommRequirements_t* reqs,
          ncclDevComm_t* outDevComm) {
    return unsupported("ncclDevCommCreate", "no NCCL device API (kernels using ncclDevComm)");
}

VNCCL_API(ncclResult_t, ncclDevCommDestroy, ncclComm_t comm, const ncclDevComm_t* devComm) {
    return unsupported("ncclDevCommDestroy", "no NCCL device API");
}

} // extern "C"
