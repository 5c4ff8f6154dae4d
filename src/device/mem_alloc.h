/* SPDX-License-Identifier: BSD-3-Clause */
/* vcclMemAlloc's memory: exportable CUDA VMM memory where the GPU allows (VCCL_MEM_VMM), else cudaMalloc rounded up
 * to whole 2 MiB blocks (CUDA IPC maps by block); mem_free refuses pointers it did not hand out. */
#ifndef VCCL_DEVICE_MEM_ALLOC_H_
#define VCCL_DEVICE_MEM_ALLOC_H_

#include <cstddef>

#include "vccl.h"

namespace vccl {

/* size > 0. */
vcclResult_t mem_alloc(size_t size, void** ptr);
/* ptr != NULL. */
vcclResult_t mem_free(void* ptr);

} // namespace vccl

#endif
