/* SPDX-License-Identifier: BSD-3-Clause */
/* Where a buffer lives: host memory (pageable, pinned or managed) or device memory. */
#ifndef VCCL_CORE_MEM_TYPE_H_
#define VCCL_CORE_MEM_TYPE_H_

namespace vccl {

enum class MemType { Host = 0, Cuda = 1 };

} // namespace vccl

#endif
