/* SPDX-License-Identifier: BSD-3-Clause */
/* Error strings, last error, version. */
#include "comm/comm.h"
#include "core/log.h"
#include "core/status.h"
#include "vccl.h"

extern "C" VCCL_EXPORT const char* vcclGetErrorString(vcclResult_t result) {
    switch (result) {
    case vcclSuccess: return "no error";
    case vcclUnhandledCudaError: return "unhandled cuda error (run with VCCL_DEBUG=INFO for details)";
    case vcclSystemError: return "unhandled system error (run with VCCL_DEBUG=INFO for details)";
    case vcclInternalError: return "internal error - please report this issue to the vccl developers";
    case vcclInvalidArgument: return "invalid argument (run with VCCL_DEBUG=WARN for details)";
    case vcclInvalidUsage: return "invalid usage (run with VCCL_DEBUG=WARN for details)";
    case vcclRemoteError: return "remote process exited or there was a network error";
    case vcclInProgress: return "vccl operation in progress";
    case vcclTimeout: return "operation timed out";
    default: return "unknown result code";
    }
}

extern "C" VCCL_EXPORT const char* vcclGetLastError(vcclComm_t comm) {
    if (comm != nullptr && vccl::comm_is_live(comm) && comm->async_error.load() != vcclSuccess) {
        std::lock_guard<std::mutex> lock(comm->error_mutex);
        thread_local std::string copy;
        copy = comm->async_error_text;
        return copy.c_str();
    }
    return vccl::last_error_message();
}

extern "C" VCCL_EXPORT vcclResult_t vcclGetVersion(int* version) {
    if (version == nullptr) return vccl::set_last_error(vcclInvalidArgument, "vcclGetVersion: version is NULL");
    *version = VCCL_VERSION_CODE;
    return vcclSuccess;
}

extern "C" VCCL_EXPORT vcclResult_t vcclSetLastError(vcclResult_t result, const char* text) {
    if (text == nullptr) text = vcclGetErrorString(result);
    VCCL_WARN(vccl::kLogAll, "%s", text);
    return vccl::set_last_error(result, "%s", text);
}
