/* SPDX-License-Identifier: BSD-3-Clause */
/* Pinned host memory of the staged path (device buffers moved through host memory), and the copies between
 * device buffers and its slots. */
#ifndef VCCL_TRANSPORT_STAGING_STAGING_BUFFER_H_
#define VCCL_TRANSPORT_STAGING_STAGING_BUFFER_H_

#include <cstddef>
#include <utility>

#include "vccl.h"

namespace vccl {

/* Pinned host memory reused across operations of one communicator. */
class StagingBuffer {
public:
    ~StagingBuffer();
    /* At least `bytes` of pinned (or, failing that, pageable) memory; contents are not preserved. Pinned
     * memory is allocated with `device` current where it is >= 0 (a host-memory call's thread may have none:
     * GPU 0 would get a context). */
    vcclResult_t get(size_t bytes, void** out, int device = -1);
    size_t bytes() const { return bytes_; }
    /* Exchanges the memory of two buffers (a destroyed communicator's goes to its teardown). */
    void swap(StagingBuffer& other) {
        std::swap(ptr_, other.ptr_);
        std::swap(bytes_, other.bytes_);
        std::swap(pinned_, other.pinned_);
    }
    /* Whether the memory is pinned: an asynchronous copy into pageable memory makes the host wait for it. */
    bool pinned() const { return pinned_; }
    /* Frees the memory now (a destroyed communicator's). */
    void release() {
        this->~StagingBuffer();
        ptr_ = nullptr;
        bytes_ = 0;
    }
private:
    void* ptr_ = nullptr;
    size_t bytes_ = 0;
    bool pinned_ = false;
};

/* A copy between a device buffer and a pinned staging slot, in `rows` rows of `bytes` each: row i at
 * device + i * device_pitch and slot + offset + i * host_pitch. Rows let a staged collective cut into pieces
 * move one column of every rank's block at once (AllGather, ReduceScatter, AlltoAll: algo/staged_layout.h). */
struct StagedCopy {
    void* device;
    size_t offset;
    size_t bytes;
    size_t rows = 1;
    size_t device_pitch = 0; // with rows > 1
    size_t host_pitch = 0;
};
/* Enqueues `c` on `stream` (device to slot when to_slot, else back) without waiting; empty copies enqueue
 * nothing. One command for every row count (a 2-D copy) unless a pitch is beyond what CUDA accepts. */
vcclResult_t enqueue_staged_copy(char* slot, const StagedCopy& c, bool to_slot, vcclStream_t stream);

} // namespace vccl

#endif
