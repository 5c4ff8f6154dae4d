/* SPDX-License-Identifier: BSD-3-Clause */
/* vcclGroupStart / vcclGroupEnd: a per-thread list of operations issued together at the outermost end. */
#ifndef VCCL_COMM_GROUP_H_
#define VCCL_COMM_GROUP_H_

#include "comm/enqueue.h"

namespace vccl {

bool group_active();
void group_add(const Op& op);
vcclResult_t group_start();
vcclResult_t group_end();

} // namespace vccl

#endif
