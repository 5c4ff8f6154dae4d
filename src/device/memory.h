/* SPDX-License-Identifier: BSD-3-Clause */
/* Memory types and streams. Without CUDA every pointer is host memory and only the NULL stream exists. */
#ifndef VCCL_DEVICE_MEMORY_H_
#define VCCL_DEVICE_MEMORY_H_

#include <functional>
#include <memory>
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

/* The calling thread's current GPU; -1 without CUDA or without a GPU. */
int current_device();
/* Makes `device` current on the calling thread (a thread of vccl's that acts for a caller, as a nonblocking
 * creation does); false (error set) where CUDA refuses. */
bool make_device_current(int device);

/* Whether `stream` is being captured into a CUDA graph (also the legacy NULL stream while another stream captures
 * in global mode); false without CUDA. */
bool stream_capturing(vcclStream_t stream);

/* While one lives, the calling thread's CUDA calls do not disturb a capture in progress (cudaStreamCaptureModeRelaxed):
 * the calls vccl makes beside a captured call (reads of the peers' FAIL words on private streams, host-mapped memory)
 * are not part of it, and in the global and thread-local modes CUDA would refuse them and invalidate the capture. */
class RelaxedCapture {
public:
    RelaxedCapture();
    ~RelaxedCapture();
    RelaxedCapture(const RelaxedCapture&) = delete;
    RelaxedCapture& operator=(const RelaxedCapture&) = delete;
private:
    int saved_ = 0;
};

/* The graph being captured on `stream` holds `keep` until it is destroyed (a CUDA user object; the reference is
 * dropped in CUDA's destructor callback, where CUDA may not be called). */
vcclResult_t stream_capture_keep(vcclStream_t stream, std::shared_ptr<void> keep);

/* For vccl's own threads (proxy, idle progress, teardown): the same for the whole thread, so a capture on the
 * application's threads in global mode is never invalidated by their CUDA calls. */
void relax_capture_for_this_thread();

/* PCI bus ids of every GPU this process can see, in CUDA order; empty without CUDA or without GPUs. */
std::vector<std::string> device_busids();

} // namespace vccl

#endif
