/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * CUDA virtual memory management (VMM) for vcclMemAlloc: physical memory made with cuMemCreate, exportable as
 * a POSIX file descriptor, mapped into a reserved address range. Unlike cudaMalloc memory it can be shared
 * with another process without CUDA IPC's per-process 2 MiB block rules, is ready for GPUDirect RDMA where
 * the GPU supports that with VMM, and is what CUDA's own IPC-free allocators (and PyTorch's expandable
 * segments) use.
 *
 * Exporting side: a process-wide table of the allocations made here (alloc/free), looked up by the direct
 * path to describe a receive buffer (find) and to hand its descriptor to a peer (export_fds). VMM memory
 * that another allocator made (PyTorch's expandable segments) is exported too when its allocations allow
 * POSIX file descriptors (find_foreign): a receive buffer there may cross several allocations mapped side
 * by side, so it travels as a span of descriptors, one per mapping.
 * Importing side: import() maps a peer's descriptors side by side into this process; unmap() undoes it.
 */
#ifndef VCCL_DEVICE_VMM_H_
#define VCCL_DEVICE_VMM_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "vccl.h"

namespace vccl {
namespace vmm {

/* Whether `device` (a CUDA ordinal) can allocate exportable VMM memory; *why says why not. */
bool supported(int device, std::string* why);

/* At least `size` bytes (rounded up to the allocation granularity, 2 MiB on H100/H200) on `device` (the
 * current one, for which supported() said yes), readable and writable from it and from every GPU that can
 * access it as a peer. */
vcclResult_t alloc(int device, size_t size, void** ptr);
/* Whether ptr is an allocation made by alloc() and not yet freed. */
bool owns(const void* ptr);
/* Waits for the device (as cudaFree does), then unmaps and releases ptr. A peer that mapped it keeps the
 * physical memory until it unmaps its view (at its next use of that range, or when its communicator goes). */
vcclResult_t free(void* ptr);

/* The allocation made here that holds all of [p, p + bytes). */
struct Allocation {
    uint64_t id;     // unique in this process, never reused
    uintptr_t base;
    size_t size;
};
bool find(const void* p, size_t bytes, Allocation* out);

/* VMM memory not made by alloc(): the mappings that hold all of [p, p + bytes), as one span. The same
 * mappings of the same physical allocations give the same id; when the owner unmaps and maps again (new
 * allocations at the same addresses), a new id, so a peer never writes through a stale mapping. False when
 * p is not VMM memory, an allocation does not allow POSIX file descriptors, the mappings leave a gap, or
 * there are more than kMaxSpanPieces of them (callers then stage the transfer). Queries the driver for
 * every mapping on every call: the owner may remap at any time. */
bool find_foreign(const void* p, size_t bytes, Allocation* out);
constexpr size_t kMaxSpanPieces = 64;

/* New descriptors for passing allocation or span `id` to a peer (the caller closes them), one per mapping in
 * address order, with each mapping's size; false when `id` is gone (freed, or a span whose mappings changed). */
bool export_fds(uint64_t id, std::vector<int>* fds, std::vector<uint64_t>* sizes);
/* Whether allocation or span `id` still exists unchanged. */
bool alive(uint64_t id);

/* Maps the allocations that `fds` (from a peer's export_fds) describe side by side, sizes[i] bytes of each,
 * readable and writable from `device`. Closes every fd in every case. */
vcclResult_t import(const std::vector<int>& fds, const std::vector<uint64_t>& sizes, int device, void** ptr);
/* Undoes import(); size is the sum of the sizes. */
void unmap(void* ptr, size_t size);

} // namespace vmm
} // namespace vccl

#endif
