/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Stream-ordered copies and stream joins of the device paths: device to device, device to host and back (the
 * synchronous staging path's, which wait for their stream), a read of device bytes for the host, and one stream
 * waiting for another without the host waiting.
 */
#ifndef VCCL_DEVICE_COPIES_H_
#define VCCL_DEVICE_COPIES_H_

#include <cstddef>

#include "vccl.h"

namespace vccl {

/* A device-to-device copy of `bytes` from `src` to `dst` enqueued on `stream`, no host wait (in-place exchanges copy the outgoing data
 * first, so sends can read it after a receive of the same batch has overwritten it). */
vcclResult_t copy_device_to_device(void* dst, const void* src, size_t bytes, vcclStream_t stream);
/* Reads `bytes` of device memory at `src` into host memory at `dst`, in stream order on `stream` (whose earlier
 * work the caller has waited for) or, for a NULL stream, on a private non-blocking stream: the legacy stream would
 * also wait for every blocking stream of the GPU, where another communicator's work may be waiting for a peer. */
vcclResult_t read_device_bytes(void* dst, const void* src, size_t bytes, vcclStream_t stream);
/* Work enqueued on `waiter` from now on waits for what `signaller` has enqueued so far (no host wait). */
vcclResult_t stream_wait_for(vcclStream_t waiter, vcclStream_t signaller);

vcclResult_t copy_device_to_host(void* dst, const void* src, size_t bytes, vcclStream_t stream);
vcclResult_t copy_host_to_device(void* dst, const void* src, size_t bytes, vcclStream_t stream);

} // namespace vccl

#endif
