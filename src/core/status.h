/* SPDX-License-Identifier: BSD-3-Clause */
/* Status helpers: vcclResult_t is the one status type inside vccl too. */
#ifndef VCCL_CORE_STATUS_H_
#define VCCL_CORE_STATUS_H_

#include "vccl.h"

/* Propagate a failure to the caller; the callee already logged why. */
#define VCCL_RETURN_IF_ERROR(expr)                  \
    do {                                            \
        vcclResult_t vccl_status_ = (expr);         \
        if (vccl_status_ != vcclSuccess) {          \
            return vccl_status_;                    \
        }                                           \
    } while (0)

#define VCCL_LIKELY(x) __builtin_expect(!!(x), 1)
#define VCCL_UNLIKELY(x) __builtin_expect(!!(x), 0)

namespace vccl {

/* Records a description of the error for vcclGetLastError() on this thread and returns `result`.
 * Used where an error is first decided. */
vcclResult_t set_last_error(vcclResult_t result, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
const char* last_error_message();
void clear_last_error();

} // namespace vccl

#endif
