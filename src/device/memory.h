/* SPDX-License-Identifier: BSD-3-Clause */
/* Memory types and streams. Without CUDA every pointer is host memory and only the NULL stream exists. */
#ifndef VCCL_DEVICE_MEMORY_H_
#define VCCL_DEVICE_MEMORY_H_

#include <functional>
#include <string>
#include <vector>

#include "core/mem_type.h"
#include "vccl.h"

namespace vccl {

/* Where ptr lives. Host (pageable, pinned or managed) unless CUDA reports device memory. */
MemType mem_type_of(const void* ptr);
/* The GPU whose device memory ptr is; -1 for any other pointer (and without CUDA). */
int device_of(const void* ptr);
/* Waits for the stream's work (a no-op for NULL unless null_is_legacy, which waits for CUDA's legacy default
 * stream; without CUDA a non-NULL stream is an invalid argument and NULL a no-op). Every
 * 10 ms of waiting it asks `failed` whether the wait can still end (a peer the stream waits for may have given
 * up): when it returns an error (which it has set), the wait stops with it, the stream's work left enqueued.
 * Polls the stream instead of blocking in the driver, spinning for the first millisecond. */
vcclResult_t stream_synchronize_watching(vcclStream_t stream, bool null_is_legacy,
                                         const std::function<vcclResult_t()>& failed);

/* The GPU `stream` belongs to (the current one for the NULL and per-thread streams); false without CUDA. */
bool stream_device(vcclStream_t stream, int* device);

/* vcclInvalidUsage when the stream is being captured into a CUDA graph: vccl's transfers are driven by the
 * host proxy when the call is made, so a graph replay could not repeat them. vcclSuccess otherwise (NULL
 * stream, builds without CUDA). */
vcclResult_t stream_check_not_capturing(vcclStream_t stream, const char* call);

/* PCI bus ids of every GPU this process can see, in CUDA order; empty without CUDA or without GPUs. */
std::vector<std::string> device_busids();

} // namespace vccl

#endif
