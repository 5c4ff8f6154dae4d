/* SPDX-License-Identifier: BSD-3-Clause */
#include "api/check.h"

#include <cstdint>

#include "core/dtype.h"
#include "core/status.h"

namespace vccl {

vcclResult_t check_comm_handle(const vcclComm* comm, const char* fn) {
    if (comm == nullptr) return set_last_error(vcclInvalidArgument, "%s: comm is NULL", fn);
    if (!comm_is_live(comm)) {
        return set_last_error(vcclInvalidUsage, "%s: comm %p is not a live communicator (destroyed or aborted?)",
                              fn, static_cast<const void*>(comm));
    }
    return vcclSuccess;
}

vcclResult_t check_comm(const vcclComm* comm, const char* fn) {
    VCCL_RETURN_IF_ERROR(check_comm_handle(comm, fn));
    const int creation = comm->creation.load();
    if (creation == kCommCreating) {
        return set_last_error(vcclInvalidUsage, "%s: comm %p is still being created (blocking = 0): call "
                              "vcclCommGetAsyncError until it returns vcclSuccess first", fn,
                              static_cast<const void*>(comm));
    }
    if (creation == kCommCreationFailed) {
        return set_last_error(vcclInvalidUsage, "%s: the creation of comm %p failed (vcclCommGetAsyncError says "
                              "why): destroy or abort it", fn, static_cast<const void*>(comm));
    }
    return vcclSuccess;
}

vcclResult_t check_dtype(vcclDataType_t type, const char* fn) {
    if (!dtype_valid(type)) return set_last_error(vcclInvalidArgument, "%s: invalid datatype %d", fn, int(type));
    return vcclSuccess;
}

vcclResult_t check_op(vcclRedOp_t op, const char* fn) {
    if (!op_valid(op)) return set_last_error(vcclInvalidArgument, "%s: invalid reduction op %d", fn, int(op));
    return vcclSuccess;
}

vcclResult_t check_rank(int rank, int nranks, const char* what, const char* fn) {
    if (rank < 0 || rank >= nranks) {
        return set_last_error(vcclInvalidArgument, "%s: %s %d is out of range [0, %d)", fn, what, rank, nranks);
    }
    return vcclSuccess;
}

vcclResult_t check_bytes(size_t count, size_t multiplier, vcclDataType_t type, size_t* bytes, const char* fn) {
    size_t elems = 0, total = 0;
    if (__builtin_mul_overflow(count, multiplier, &elems) ||
        __builtin_mul_overflow(elems, dtype_size(type), &total) || total > size_t(INT64_MAX)) {
        return set_last_error(vcclInvalidArgument, "%s: count %zu of %s overflows the addressable size", fn, count,
                              dtype_name(type));
    }
    *bytes = total;
    return vcclSuccess;
}

vcclResult_t check_buffer(const void* ptr, size_t bytes, const char* what, const char* fn) {
    if (ptr == nullptr && bytes > 0) return set_last_error(vcclInvalidArgument, "%s: %s is NULL", fn, what);
    return vcclSuccess;
}

} // namespace vccl
