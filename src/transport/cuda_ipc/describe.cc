/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Descriptors of this side's buffers, and the exports of receive buffers: a CUDA IPC handle of the
 * allocation, or a VMM allocation's file descriptors sent to the peer first (transport/cuda_ipc/fd_channel.h).
 */
#include "transport/cuda_ipc/cuda_ipc_p2p.h"

#if VCCL_HAVE_CUDA

#include <cstring>

#include "core/status.h"
#include "device/memory.h"
#include "device/vmm.h"

namespace vccl {

void CudaIpcP2p::describe(int peer, const void* buf, size_t bytes, bool is_recv, const Registration* reg,
                          P2pDescriptor* out) {
    memset(out, 0, sizeof(*out));
    out->magic = kDescMagic;
    out->bytes = bytes;
    // A registration may span several allocations: its cached export holds only for the first one.
    const uintptr_t b = reinterpret_cast<uintptr_t>(buf);
    if (reg != nullptr && reg->exported && (b < reg->alloc_base || b + bytes > reg->alloc_base + reg->alloc_size)) {
        reg = nullptr;
    }
    // Another allocator's VMM memory may be remapped under a registration: described afresh every time.
    if (reg != nullptr && reg->foreign) reg = nullptr;
    if (reg != nullptr) {
        if (!reg->device) return;
        out->flags |= kDescDevice;
        if (!is_recv || !reg->exported || peer < 0) return;
        describe_export(peer, buf, *reg, out);
        return;
    }
    if (buf == nullptr || mem_type_of(buf) != MemType::Cuda) return;
    out->flags |= kDescDevice;
    if (!is_recv || peer < 0) return;
    Registration r;
    if (!export_buffer(buf, bytes, &r)) return;
    describe_export(peer, buf, r, out);
}

void CudaIpcP2p::describe_export(int peer, const void* buf, const Registration& r, P2pDescriptor* out) {
    if (r.vmm) {
        VmmRef ref;
        memcpy(&ref, r.handle, sizeof(ref));
        // Records of peers holding freed allocations are dropped now and then (ids are never reused).
        if (fds_.offers() > kMaxOffers) fds_.prune_offers([](uint64_t id) { return vmm::alive(id); });
        auto make = [&](FdChannel::FdSet* set) { return vmm::export_fds(ref.id, &set->fds, &set->values); };
        if (!fds_.offer_set(peer, ref.id, make)) return;
        out->flags |= kDescVmm;
    }
    static_assert(sizeof(r.handle) <= sizeof(out->handle), "IPC handle size");
    memcpy(out->handle, r.handle, sizeof(r.handle));
    out->offset = reinterpret_cast<uintptr_t>(buf) - uintptr_t(r.alloc_base);
    out->alloc_base = r.alloc_base;
    out->alloc_size = r.alloc_size;
    out->flags |= kDescIpc;
}

bool CudaIpcP2p::export_buffer(const void* buf, size_t bytes, Registration* r) {
    if (!driver().memops_ok) return false;
    vmm::Allocation a;
    auto as_vmm = [&](bool foreign) { // no CUDA IPC handle: file descriptors instead
        if (!fds_.is_open()) return false;
        VmmRef ref{kVmmMagic, foreign ? kVmmSpan : 0u, a.id, a.size};
        static_assert(sizeof(ref) <= sizeof(r->handle), "VMM reference size");
        memcpy(r->handle, &ref, sizeof(ref));
        r->vmm = true;
        r->foreign = foreign;
        r->alloc_base = uint64_t(a.base);
        r->alloc_size = a.size;
        return true;
    };
    if (vmm::find(buf, 1, &a)) return as_vmm(false); // vcclMemAlloc memory
    CUdeviceptr base = 0;
    size_t size = 0;
    if (driver().address_range(&base, &size, reinterpret_cast<CUdeviceptr>(buf)) != CUDA_SUCCESS) return false;
    cudaIpcMemHandle_t handle;
    if (cudaIpcGetMemHandle(&handle, reinterpret_cast<void*>(base)) != cudaSuccess) {
        cudaGetLastError();
        // Another allocator's VMM memory (PyTorch's expandable segments) when its allocations allow file
        // descriptors; anything else (stream-ordered pools, VMM without them) takes the staged path.
        return vmm::find_foreign(buf, bytes > 0 ? bytes : 1, &a) && as_vmm(true);
    }
    static_assert(sizeof(handle) <= sizeof(r->handle), "IPC handle size");
    memcpy(r->handle, &handle, sizeof(handle));
    r->alloc_base = uint64_t(base);
    r->alloc_size = size;
    return true;
}

} // namespace vccl

#endif
