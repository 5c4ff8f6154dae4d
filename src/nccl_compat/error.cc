/* SPDX-License-Identifier: BSD-3-Clause */
/* libvccl-nccl: result codes, error strings, last error, version, datatype and operation mapping. */
#include <cstdarg>
#include <cstdio>

#include "core/log.h"
#include "core/status.h"
#include "nccl_compat/compat.h"

namespace vccl {
namespace nccl_compat {

ncclResult_t to_nccl(vcclResult_t r) {
    switch (r) {
    case vcclSuccess: return ncclSuccess;
    case vcclUnhandledCudaError: return ncclUnhandledCudaError;
    case vcclSystemError: return ncclSystemError;
    case vcclInternalError: return ncclInternalError;
    case vcclInvalidArgument: return ncclInvalidArgument;
    case vcclInvalidUsage: return ncclInvalidUsage;
    case vcclRemoteError: return ncclRemoteError;
    case vcclInProgress: return ncclInProgress;
    case vcclTimeout: return ncclRemoteError; // NCCL has no timeout code: a peer or the network is stuck
    default: return ncclInternalError;
    }
}

ncclResult_t fail(ncclResult_t r, const char* fmt, ...) {
    char text[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    VCCL_WARN(kLogAll, "NCCL compat: %s", text);
    // ncclResult_t and vcclResult_t share values 0..7.
    set_last_error(vcclResult_t(r), "%s", text);
    return r;
}

ncclResult_t unsupported(const char* fn, const char* why) {
    return fail(ncclInvalidUsage, "%s is not supported by vccl (%s)", fn, why);
}

ncclResult_t map_dtype(ncclDataType_t t, const char* fn, vcclDataType_t* out) {
    // Every NCCL type, FP8 included, has vccl's value (abi_asserts.h).
    static_assert(int(ncclNumTypes) == int(vcclNumTypes), "datatype values are passed through");
    if (int(t) >= 0 && int(t) < int(vcclNumTypes)) {
        *out = vcclDataType_t(t);
        return ncclSuccess;
    }
    return fail(ncclInvalidArgument, "%s: invalid datatype %d", fn, int(t));
}

ncclResult_t map_op(ncclRedOp_t op, const char* fn, vcclRedOp_t* out) {
    // The built-in ops have NCCL's values, and so do the ones ncclRedOpCreatePreMulSum makes (from ncclNumOps
    // on, per communicator): vccl checks the latter against the communicator it is called with.
    static_assert(int(ncclNumOps) == int(vcclNumOps), "op values are passed through");
    if (int(op) >= 0) {
        *out = vcclRedOp_t(op);
        return ncclSuccess;
    }
    return fail(ncclInvalidArgument, "%s: invalid reduction op %d", fn, int(op));
}

} // namespace nccl_compat
} // namespace vccl

using namespace vccl::nccl_compat;

extern "C" {

VNCCL_API(ncclResult_t, ncclGetVersion, int* version) {
    if (version == nullptr) return fail(ncclInvalidArgument, "ncclGetVersion: version is NULL");
    *version = VCCL_NCCL_COMPAT_VERSION_CODE;
    return ncclSuccess;
}

/* Not exported (the library exports NCCL's API only): the bytes by which a tool that opens a libnccl.so.2 file tells
 * this library from NVIDIA's (vccl-perf refuses to take it as its NCCL baseline, which would compare vccl with
 * itself). */
extern "C" __attribute__((used)) const char vccl_nccl_shim_marker[] = "vccl-nccl-shim: NCCL's API over vccl";

VNCCL_API(const char*, ncclGetErrorString, ncclResult_t result) {
    switch (result) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error (run with VCCL_DEBUG=INFO for details)";
    case ncclSystemError: return "unhandled system error (run with VCCL_DEBUG=INFO for details)";
    case ncclInternalError: return "internal error - please report this issue to the vccl developers";
    case ncclInvalidArgument: return "invalid argument (run with VCCL_DEBUG=WARN for details)";
    case ncclInvalidUsage: return "invalid usage (run with VCCL_DEBUG=WARN for details)";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    default: return "unknown result code";
    }
}

VNCCL_API(const char*, ncclGetLastError, ncclComm_t comm) {
    return vcclGetLastError(live_vccl_comm(comm));
}

/* Deprecated in NCCL and meaningless here (vccl reads VCCL_DEBUG* once). */
VNCCL_API(void, ncclResetDebugInit, void) {}

} // extern "C"
