/*
 * Device-memory helpers shared by the device paths: pinned host staging memory of a communicator, the order of
 * a communicator's device work across streams (and its teardown once that work has run), stream-ordered
 * snapshots for in-place exchanges, and copies between device buffers and pinned staging slots.
 */
#ifndef VCCL_DEVICE_STAGING_H_
#define VCCL_DEVICE_STAGING_H_

#include <cstddef>
#include <functional>
#include <utility>
#include <vector>

#include "core/export.h"
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

/* Device memory reused across operations of one communicator. Two kinds, which grow differently (and come
 * from different allocators):
 * - mapped by peers (receive slots of reductions), from cudaMalloc (CUDA IPC): growing waits for `stream`, then
 *   frees the old block before
 *   making the new one. Peers map a block's whole cudaMalloc allocation, which CUDA lets a process map only
 *   once: a new block carved from the same allocation while the old one lives could not be mapped (2x H200,
 *   run184: "cudaIpcOpenMemHandle ... resource already mapped"). Callers that hold the communicator's lock
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

/* Keeps a communicator's device work in call order whatever streams the calls use, as NCCL does: its
 * operations share scratch memory and sequence numbers, so one enqueued on a stream other than the last one
 * first waits (on the device) for everything enqueued on the last one. One event record per call, about a
 * microsecond of host time; the event stays valid when the caller destroys the old stream. */
class StreamOrder {
public:
    ~StreamOrder();
    /* Before enqueuing a call's work on `streams` (its distinct streams, in order). */
    vcclResult_t before(const std::vector<vcclStream_t>& streams);
    /* After enqueuing it: the last stream waits for the others, then the call's end is recorded there. */
    vcclResult_t after(const std::vector<vcclStream_t>& streams);
    /* Calls `fn` once every call recorded so far has run on the device: now when it has (or nothing was
     * recorded), else from a thread that polls for it. For cudaFree at destroy, which would wait for the
     * whole GPU, also for a stream the caller's own work keeps blocked. `never_now`: from a thread also when
     * the calls have run, since the GPU may still be busy (or blocked) with other work (vcclCommAbort);
     * `device`: the GPU the thread works on when no call was recorded (the communicator's). */
    void run_when_done(std::function<void()> fn, bool never_now = false, int device = -1);
private:
    void* event_ = nullptr; // cudaEvent_t, made on first use
    int event_device_ = -1;
    vcclStream_t last_ = nullptr;
    bool recorded_ = false;
};

namespace testing {
/* Test hook (tests/gpu/exit_worker.cc, exported by libvccl.map): teardown threads started from now on hold
 * `ms` milliseconds (at most 1000, half the exit's wait for them) once they begin freeing, then say on stderr that
 * they finished, so that a process exiting meanwhile shows whether its exit waited for them. */
VCCL_INTERNAL_API void hold_teardown_ms(int ms);
} // namespace testing

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

/* A copy between a device buffer and a pinned staging slot, in `rows` rows of `bytes` each: row i at
 * device + i * device_pitch and slot + offset + i * host_pitch. Rows let a staged collective cut into pieces
 * move one column of every rank's block at once (AllGather, ReduceScatter, AlltoAll: comm/staged_layout.h). */
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
