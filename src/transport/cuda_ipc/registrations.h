/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Buffers registered with a communicator (vcclCommRegister). A device buffer's CUDA IPC export is taken once,
 * at registration, so the direct transfers that use it describe it without the per-call driver queries
 * (pointer type, allocation range, IPC handle). Registration is an optimisation only: unregistered buffers
 * work the same way. Callers serialise access (the communicator's operation lock).
 */
#ifndef VCCL_TRANSPORT_CUDA_IPC_REGISTRATIONS_H_
#define VCCL_TRANSPORT_CUDA_IPC_REGISTRATIONS_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>

#include "vccl.h"

namespace vccl {

class IpcP2p;

struct Registration {
    uintptr_t begin = 0, end = 0;
    bool device = false;   // device memory (else host: nothing is cached)
    bool exported = false; // handle, alloc_base and alloc_size are valid
    bool vmm = false;      // handle is a VmmRef (VMM memory: file descriptors), not a cudaIpcMemHandle_t
    bool foreign = false;  // with vmm: another allocator's VMM memory, exported again at every use
    char handle[64] = {};  // cudaIpcMemHandle_t of the allocation that holds the buffer
    uint64_t alloc_base = 0, alloc_size = 0;
};

class Registrations {
public:
    /* Registers [buf, buf + bytes), exporting a device buffer's allocation through ipc (may be NULL);
     * *handle names it for remove(). Registrations may overlap. */
    vcclResult_t add(void* buf, size_t bytes, IpcP2p* ipc, void** handle);
    /* vcclInvalidArgument when handle is not a registration of this object. */
    vcclResult_t remove(void* handle);
    /* A registration that holds all of [buf, buf + bytes), or nullptr. */
    const Registration* find(const void* buf, size_t bytes) const;
    size_t size() const { return by_begin_.size(); }
    /* Forgets every registration (a destroyed communicator's). */
    void clear() { by_begin_.clear(); }

private:
    std::multimap<uintptr_t, std::unique_ptr<Registration>> by_begin_;
};

} // namespace vccl

#endif
