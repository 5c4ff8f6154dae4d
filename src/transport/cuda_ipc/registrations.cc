/* SPDX-License-Identifier: BSD-3-Clause */
#include "transport/cuda_ipc/registrations.h"

#include "core/status.h"
#include "transport/cuda_ipc/ipc_p2p.h"
#include "device/memory.h"

namespace vccl {

vcclResult_t Registrations::add(void* buf, size_t bytes, IpcP2p* ipc, void** handle) {
    auto r = std::make_unique<Registration>();
    r->begin = reinterpret_cast<uintptr_t>(buf);
    r->end = r->begin + bytes;
    r->device = bytes > 0 && mem_type_of(buf) == MemType::Cuda;
    // Not every allocation can be exported (stream-ordered pools, VMM without file-descriptor handles):
    // those keep the staged path.
    if (r->device && ipc != nullptr) r->exported = ipc->export_buffer(buf, bytes, r.get());
    *handle = r.get();
    uintptr_t key = r->begin;
    by_begin_.emplace(key, std::move(r));
    return vcclSuccess;
}

vcclResult_t Registrations::remove(void* handle) {
    for (auto it = by_begin_.begin(); it != by_begin_.end(); ++it) {
        if (it->second.get() == handle) {
            by_begin_.erase(it);
            return vcclSuccess;
        }
    }
    return set_last_error(vcclInvalidArgument, "vcclCommDeregister: %p is not a registration of this communicator",
                          handle);
}

const Registration* Registrations::find(const void* buf, size_t bytes) const {
    if (by_begin_.empty() || buf == nullptr) return nullptr;
    uintptr_t b = reinterpret_cast<uintptr_t>(buf), e = b + bytes;
    // Registrations that start at or before buf, nearest first.
    for (auto it = by_begin_.upper_bound(b); it != by_begin_.begin();) {
        --it;
        if (it->second->end >= e) return it->second.get();
    }
    return nullptr;
}

} // namespace vccl
