/* SPDX-License-Identifier: BSD-3-Clause */
#include "status.h"

#include <cstdarg>
#include <cstdio>

#include "log.h"

namespace vccl {

namespace {
thread_local char t_last_error[1024];
}

vcclResult_t set_last_error(vcclResult_t result, const char* fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t_last_error, sizeof(t_last_error), fmt, ap);
    va_end(ap);
    VCCL_INFO(kLogAll, "error %d (%s): %s", int(result), vcclGetErrorString(result), t_last_error);
    return result;
}

const char* last_error_message() { return t_last_error; }

void clear_last_error() { t_last_error[0] = '\0'; }

} // namespace vccl
