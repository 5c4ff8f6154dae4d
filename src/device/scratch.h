/* SPDX-License-Identifier: BSD-3-Clause */
/* Device scratch memory a communicator reuses across operations (reduction slots mapped by peers, copies read
 * only here). */
#ifndef VCCL_DEVICE_SCRATCH_H_
#define VCCL_DEVICE_SCRATCH_H_

#include <cstddef>
#include <utility>
#include <vector>

#include "vccl.h"

namespace vccl {

/* Device memory reused across operations of one communicator. Two kinds, which grow differently (and come
 * from different allocators):
 * - mapped by peers (receive slots of reductions), from cudaMalloc (CUDA IPC): growing waits for `stream`, then
 *   frees the old block before
 *   making the new one. Peers map a block's whole cudaMalloc allocation, which CUDA lets a process map only
 *   once: a new block carved from the same allocation while the old one lives could not be mapped (on 2x H200
 *   "cudaIpcOpenMemHandle ... resource already mapped"). Callers that hold the communicator's lock
 *   first wait for the stream in a way an abort can end (comm_device_stream_wait, when grows_for says so), so the
 *   wait here finds the stream done.
 * - read by this rank only (copies of in-place sends and of PreMulSum inputs, which travel from here): from VMM
 *   (an address range of its own, outside cudaMalloc's shared 2 MiB blocks; cudaMalloc where VMM is missing); growing
 *   never waits for the device. Calls already queued may still read the old block, so it is kept until the object
 *   goes (with the communicator's teardown, on its thread); growth at least doubles, so the blocks together stay
 *   under twice the largest. */
class DeviceScratch {
public:
    enum class Use { MappedByPeers, LocalOnly };
    explicit DeviceScratch(Use use) : use_(use) {}
    DeviceScratch(DeviceScratch&& other) noexcept
        : use_(other.use_), ptr_(other.ptr_), bytes_(other.bytes_), outgrown_(std::move(other.outgrown_)) {
        other.ptr_ = nullptr;
        other.bytes_ = 0;
        other.outgrown_.clear();
    }
    DeviceScratch& operator=(DeviceScratch&&) = delete;
    ~DeviceScratch();
    /* `stream`: where the calls that used the block ran (MappedByPeers: waited for before the old block goes). */
    vcclResult_t get(size_t bytes, vcclStream_t stream, void** out);
    /* Whether get(bytes) would replace a block (and so, MappedByPeers, wait for the stream). */
    bool grows_for(size_t bytes) const { return ptr_ != nullptr && bytes > bytes_; }
    /* Room a slot of `bytes` takes when a call carves several side by side (each stays 256-byte aligned). */
    static size_t slot_bytes(size_t bytes) { return (bytes + 255) / 256 * 256; }
private:
    vcclResult_t allocate(size_t want, void** out);
    static void release(void* p);
    Use use_;
    void* ptr_ = nullptr;
    size_t bytes_ = 0;
    std::vector<void*> outgrown_;
};

} // namespace vccl

#endif
