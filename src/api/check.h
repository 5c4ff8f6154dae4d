/* SPDX-License-Identifier: BSD-3-Clause */
/* Argument checks shared by the API entry points. Each failure names the function and the argument. */
#ifndef VCCL_API_CHECK_H_
#define VCCL_API_CHECK_H_

#include <cstddef>

#include "comm/comm.h"
#include "vccl.h"

namespace vccl {

/* NULL -> vcclInvalidArgument; destroyed, aborted-and-freed or never created -> vcclInvalidUsage; so is a
 * communicator whose nonblocking creation is still running or failed (comm/comm_create.cc). */
vcclResult_t check_comm(const vcclComm* comm, const char* fn);
/* The same, but a communicator still being created or whose creation failed passes (vcclCommGetAsyncError,
 * vcclCommDestroy and vcclCommAbort take those). */
vcclResult_t check_comm_handle(const vcclComm* comm, const char* fn);
vcclResult_t check_dtype(vcclDataType_t type, const char* fn);
vcclResult_t check_op(vcclRedOp_t op, const char* fn);
vcclResult_t check_rank(int rank, int nranks, const char* what, const char* fn);
/* *bytes = count * elems_per_count * dtype size, failing on overflow (and on counts beyond what a
 * signed 64-bit byte offset can hold). */
vcclResult_t check_bytes(size_t count, size_t multiplier, vcclDataType_t type, size_t* bytes, const char* fn);
/* A buffer that will be read or written must not be NULL unless it covers zero bytes. */
vcclResult_t check_buffer(const void* ptr, size_t bytes, const char* what, const char* fn);

} // namespace vccl

#endif
