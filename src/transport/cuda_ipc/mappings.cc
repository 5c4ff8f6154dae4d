/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Peers' receive buffers mapped into this process: opened once and kept (bounded by
 * VCCL_P2P_MAX_MAPPINGS), closed when the peer's allocation changed, VMM views retired after their copies.
 */
#include "transport/cuda_ipc/cuda_ipc_p2p.h"

#if VCCL_HAVE_CUDA

#include <algorithm>
#include <cstring>
#include <string>

#include "core/log.h"
#include "core/status.h"
#include "core/test_point.h"
#include "device/vmm.h"

namespace vccl {

void CudaIpcP2p::unmap(const Mapping& m) {
    if (m.vmm_size > 0) {
        vmm::unmap(m.ptr, m.vmm_size);
    } else {
        ipc_handles::release(m.ipc);
    }
}

void CudaIpcP2p::retire_batch() {
    std::vector<void*> streams;
    streams.swap(batch_streams_);
    if (retiring_.empty()) return;
    Retired r;
    r.views.swap(retiring_);
    for (void* st : streams) {
        cudaEvent_t ev = nullptr;
        if (cudaEventCreateWithFlags(&ev, cudaEventDisableTiming) != cudaSuccess ||
            cudaEventRecord(ev, static_cast<cudaStream_t>(st)) != cudaSuccess) {
            cudaGetLastError();
            if (ev != nullptr) cudaEventDestroy(ev);
            // No knowing when the copies are done: the views stay mapped for good.
            for (cudaEvent_t e : r.events) cudaEventDestroy(e);
            for (const View& v : r.views) {
                VCCL_WARN(kLogDevice, "rank %d: cannot order the release of a peer's VMM buffer after its "
                          "copies; it stays mapped (%zu bytes)", rank_, v.size);
            }
            return;
        }
        r.events.push_back(ev);
    }
    retired_.push_back(std::move(r));
}

void CudaIpcP2p::reap_retired() {
    for (size_t i = 0; i < retired_.size();) {
        bool done = true;
        for (cudaEvent_t ev : retired_[i].events) {
            cudaError_t q = cudaEventQuery(ev);
            if (q == cudaErrorNotReady) done = false;
            else if (q != cudaSuccess) cudaGetLastError(); // a failed device: nothing will run any more
        }
        if (!done) {
            ++i;
            continue;
        }
        for (const View& v : retired_[i].views) vmm::unmap(v.ptr, v.size);
        for (cudaEvent_t ev : retired_[i].events) cudaEventDestroy(ev);
        retired_.erase(retired_.begin() + long(i));
    }
}

void CudaIpcP2p::drop(int peer, const Mapping& m) {
    if (m.vmm_size == 0) {
        unmap(m);
    } else {
        retiring_.push_back(View{m.ptr, m.vmm_size});
        VmmRef ref;
        memcpy(&ref, m.handle, sizeof(ref));
        fds_.forget(peer, ref.id);
    }
}

vcclResult_t CudaIpcP2p::map(int peer, const P2pDescriptor& desc, void* stream, void** base, ipc_handles::Ref* ipc) {
    auto& list = mappings_[peer];
    ++clock_;
    if (!retired_.empty()) reap_retired();
    if (std::find(batch_streams_.begin(), batch_streams_.end(), stream) == batch_streams_.end()) {
        batch_streams_.push_back(stream);
    }
    if (peer == rank_) {
        // A transfer to itself: the buffer is in this process already. CUDA refuses to open a handle in the
        // process that exported it, so mapping it failed, the send gave up, and the communicator was left
        // failed by its own FAIL flag (alltoall loops over send/recv include the rank itself).
        *base = reinterpret_cast<void*>(uintptr_t(desc.alloc_base));
        return vcclSuccess;
    }
    for (size_t i = 0; i < list.size(); ++i) {
        Mapping& m = list[i];
        if (memcmp(m.handle, desc.handle, sizeof(m.handle)) != 0) continue;
        if (closed_elsewhere(m)) { // opened again below
            drop(peer, m);
            list.erase(list.begin() + long(i));
            break;
        }
        m.last_use = clock_;
        *base = m.ptr;
        *ipc = m.ipc;
        return vcclSuccess;
    }
    // The peer freed an allocation and made a new one over its range: the old mapping is stale (its
    // last transfer completed before the peer could free it), and CUDA refuses to map the range twice.
    // Not so for spans of another allocator's VMM memory: two live receive buffers of one segment may
    // share an allocation, and their views coexist (a remapped span comes with a new id, and its stale
    // view goes by least recent use).
    const bool span = is_span(desc.handle, desc.flags);
    close_mappings_if(peer, [&](const Mapping& m) {
        return !span && !is_span(m.handle, m.vmm_size > 0 ? kDescVmm : 0u) &&
               m.alloc_base < desc.alloc_base + desc.alloc_size && desc.alloc_base < m.alloc_base + m.alloc_size;
    });
    if (list.size() >= max_mappings_) { // forget the least recently used buffer
        test_point(test_key_, TestPoint::IpcEviction);
        if (evictions_++ == 0) {
            VCCL_WARN(kLogDevice, "rank %d: more than %zu receive buffers of rank %d are mapped "
                      "(VCCL_P2P_MAX_MAPPINGS); each further one lets the least recently used mapping go, "
                      "which waits for the whole GPU", rank_, max_mappings_, peer);
        }
        size_t oldest = 0;
        for (size_t i = 1; i < list.size(); ++i) {
            if (list[i].last_use < list[oldest].last_use) oldest = i;
        }
        drop(peer, list[oldest]);
        list.erase(list.begin() + long(oldest));
    }
    if (desc.flags & kDescVmm) return map_vmm(peer, desc, list, base);
    // Small cudaMalloc allocations share 2 MiB blocks, and CUDA maps an exported block only once per process:
    // the process-wide table closes the mappings of other allocations in the same blocks, of every
    // communicator, when CUDA refuses (counted: each close waits for the device; on the H100 with CUDA 13
    // this did not happen within one communicator, see GpuP2p.SmallBuffersOfOneBlockAreMappedOnce).
    ipc_handles::Ref opened;
    bool made_room = false;
    int err = ipc_handles::acquire(exporters_[peer], device_, desc.handle, desc.alloc_base, desc.alloc_size,
                                   &opened, &made_room);
    if (made_room) {
        test_point(test_key_, TestPoint::IpcBlockReopen);
        close_mappings_if(peer, closed_elsewhere);
    }
    if (err != 0) return cuda_fail("cudaIpcOpenMemHandle of a peer's receive buffer", cudaError_t(err));
    remember(list, desc, opened->ptr, 0, opened);
    *base = opened->ptr;
    *ipc = opened;
    return vcclSuccess;
}

vcclResult_t CudaIpcP2p::map_vmm(int peer, const P2pDescriptor& desc, std::vector<Mapping>& list, void** base) {
    void* ptr = nullptr;
    // Its file descriptors came over the descriptor socket before this descriptor (FdChannel::offer_set).
    VmmRef ref;
    memcpy(&ref, desc.handle, sizeof(ref));
    if (ref.magic != kVmmMagic || ref.size == 0) {
        return set_last_error(vcclInternalError, "rank %d described a VMM buffer wrongly", peer);
    }
    std::string why;
    FdChannel::FdSet set;
    if (!fds_.take_set(peer, ref.id, kFdWaitMs, &set, &why)) {
        fds_.forget(peer, ref.id); // so that the next transfer into that buffer brings it again
        return set_last_error(vcclSystemError, "cannot map rank %d's receive buffer (VMM memory): %s",
                              peer, why.c_str());
    }
    uint64_t total = 0;
    for (uint64_t v : set.values) total += v;
    if (total != ref.size) {
        set.close_all();
        fds_.forget(peer, ref.id);
        return set_last_error(vcclInternalError, "rank %d's VMM buffer descriptors map %llu bytes, not %llu",
                              peer, (unsigned long long)total, (unsigned long long)ref.size);
    }
    vcclResult_t imported = vmm::import(set.fds, set.values, device_, &ptr); // closes the descriptors
    if (imported != vcclSuccess) {
        fds_.forget(peer, ref.id);
        return imported;
    }
    remember(list, desc, ptr, size_t(ref.size), nullptr);
    *base = ptr;
    return vcclSuccess;
}

bool CudaIpcP2p::is_span(const char* handle, uint32_t flags) {
    if (!(flags & kDescVmm)) return false;
    VmmRef ref;
    memcpy(&ref, handle, sizeof(ref));
    return (ref.flags & kVmmSpan) != 0;
}

void CudaIpcP2p::remember(std::vector<Mapping>& list, const P2pDescriptor& desc, void* ptr, size_t vmm_size,
                          ipc_handles::Ref ipc) {
    Mapping m;
    memcpy(m.handle, desc.handle, sizeof(m.handle));
    m.ptr = ptr;
    m.last_use = clock_;
    m.alloc_base = desc.alloc_base;
    m.alloc_size = desc.alloc_size;
    m.vmm_size = vmm_size;
    m.ipc = std::move(ipc);
    list.push_back(m);
}

} // namespace vccl

#endif
