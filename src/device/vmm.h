/*
 * CUDA virtual memory management (VMM) for vcclMemAlloc: physical memory made with cuMemCreate, exportable as
 * a POSIX file descriptor, mapped into a reserved address range. Unlike cudaMalloc memory it can be shared
 * with another process without CUDA IPC's per-process 2 MiB block rules, is ready for GPUDirect RDMA where
 * the GPU supports that with VMM, and is what CUDA's own IPC-free allocators (and PyTorch's expandable
 * segments) use.
 *
 * Exporting side: a process-wide table of the allocations made here (alloc/free), looked up by the direct
 * path to describe a receive buffer (find) and to hand its descriptor to a peer (export_fd).
 * Importing side: import() maps a peer's descriptor into this process; unmap() undoes it.
 */
#ifndef VCCL_DEVICE_VMM_H_
#define VCCL_DEVICE_VMM_H_

#include <cstddef>
#include <cstdint>
#include <string>

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
/* A new descriptor of allocation `id` for passing to a peer (the caller closes it), or -1. */
int export_fd(uint64_t id);
/* Whether allocation `id` still exists. */
bool alive(uint64_t id);

/* Maps the allocation of `size` bytes that `fd` (from a peer's export_fd) describes, readable and writable
 * from `device`. Closes fd in every case. */
vcclResult_t import(int fd, size_t size, int device, void** ptr);
void unmap(void* ptr, size_t size);

} // namespace vmm
} // namespace vccl

#endif
