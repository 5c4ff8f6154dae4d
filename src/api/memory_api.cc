/* SPDX-License-Identifier: BSD-3-Clause */
/* Memory entry points: vcclMemAlloc/vcclMemFree (device/mem_alloc.h) and buffer registration
 * (transport/cuda_ipc/registrations.h). */
#include <cstdint>
#include <mutex>

#include "api/check.h"
#include "core/status.h"
#include "device/mem_alloc.h"

using namespace vccl;

extern "C" VCCL_EXPORT vcclResult_t vcclMemAlloc(void** ptr, size_t size) {
    if (ptr == nullptr) return set_last_error(vcclInvalidArgument, "vcclMemAlloc: ptr is NULL");
    *ptr = nullptr;
    if (size == 0) return vcclSuccess;
    return mem_alloc(size, ptr);
}

extern "C" VCCL_EXPORT vcclResult_t vcclMemFree(void* ptr) {
    if (ptr == nullptr) return vcclSuccess;
    return mem_free(ptr);
}

extern "C" VCCL_EXPORT vcclResult_t vcclCommRegister(const vcclComm_t comm, void* buff, size_t size, void** handle) {
    VCCL_RETURN_IF_ERROR(check_comm(comm, "vcclCommRegister"));
    if (handle == nullptr) return set_last_error(vcclInvalidArgument, "vcclCommRegister: handle is NULL");
    VCCL_RETURN_IF_ERROR(check_buffer(buff, size, "buff", "vcclCommRegister"));
    if (size > 0 && reinterpret_cast<uintptr_t>(buff) > UINTPTR_MAX - size) {
        return set_last_error(vcclInvalidArgument, "vcclCommRegister: buff %p + size %zu wraps around", buff, size);
    }
    vcclComm* c = const_cast<vcclComm*>(comm);
    std::lock_guard<std::mutex> lock(c->op_mutex);
    return c->dev.registrations.add(buff, size, c->dev.ipc.get(), handle);
}

extern "C" VCCL_EXPORT vcclResult_t vcclCommDeregister(const vcclComm_t comm, void* handle) {
    VCCL_RETURN_IF_ERROR(check_comm(comm, "vcclCommDeregister"));
    vcclComm* c = const_cast<vcclComm*>(comm);
    std::lock_guard<std::mutex> lock(c->op_mutex);
    return c->dev.registrations.remove(handle);
}
