/* SPDX-License-Identifier: BSD-3-Clause */
#include "comm/premul_ops.h"

#include <cstring>

#include "core/dtype.h"
#include "core/status.h"
#include "device/memory.h"

namespace vccl {

vcclResult_t PreMulOps::create(void* scalar, vcclDataType_t type, vcclScalarResidence_t residence, int comm_device,
                               vcclRedOp_t* out) {
    const char* fn = "vcclRedOpCreatePreMulSum";
    if (out == nullptr) return set_last_error(vcclInvalidArgument, "%s: op is NULL", fn);
    if (scalar == nullptr) return set_last_error(vcclInvalidArgument, "%s: scalar is NULL", fn);
    if (!dtype_valid(type)) return set_last_error(vcclInvalidArgument, "%s: invalid datatype %d", fn, int(type));
    Entry e;
    e.live = true;
    e.type = type;
    switch (residence) {
    case vcclScalarHostImmediate:
        memcpy(&e.scalar.host_bits, scalar, dtype_size(type));
        break;
    case vcclScalarDevice:
        if (mem_type_of(scalar) != MemType::Cuda) {
            return set_last_error(vcclInvalidArgument,
                                  "%s: the scalar is vcclScalarDevice but %p is not device memory (use "
                                  "vcclScalarHostImmediate for a host value)",
                                  fn, scalar);
        }
        if (comm_device >= 0 && device_of(scalar) != comm_device) {
            return set_last_error(vcclInvalidArgument,
                                  "%s: the vcclScalarDevice scalar %p is on GPU %d, the communicator's is GPU %d (the "
                                  "calls' kernels read it there)",
                                  fn, scalar, device_of(scalar), comm_device);
        }
        e.scalar.on_device = true;
        e.scalar.device_ptr = scalar;
        break;
    default:
        return set_last_error(vcclInvalidArgument, "%s: invalid scalar residence %d", fn, int(residence));
    }
    std::lock_guard<std::mutex> lock(mutex_);
    size_t slot = 0;
    while (slot < entries_.size() && entries_[slot].live) ++slot;
    if (slot == entries_.size()) {
        if (entries_.size() >= kMaxOps) {
            return set_last_error(vcclInvalidUsage, "%s: the communicator already holds %zu PreMulSum ops; destroy "
                                  "those no longer used (vcclRedOpDestroy)", fn, entries_.size());
        }
        entries_.emplace_back();
    }
    entries_[slot] = e;
    *out = vcclRedOp_t(int(vcclNumOps) + int(slot));
    return vcclSuccess;
}

vcclResult_t PreMulOps::destroy(vcclRedOp_t op) {
    std::lock_guard<std::mutex> lock(mutex_);
    const long slot = long(op) - long(vcclNumOps);
    if (slot < 0) {
        return set_last_error(vcclInvalidArgument, "vcclRedOpDestroy: op %d is not one vcclRedOpCreatePreMulSum made",
                              int(op));
    }
    if (size_t(slot) >= entries_.size() || !entries_[size_t(slot)].live) {
        return set_last_error(vcclInvalidArgument, "vcclRedOpDestroy: op %d is not a live op of this communicator "
                              "(made by another one, or destroyed already)", int(op));
    }
    entries_[size_t(slot)].live = false;
    return vcclSuccess;
}

vcclResult_t PreMulOps::lookup(vcclRedOp_t op, vcclDataType_t type, const char* fn, PreMulScalar* out) const {
    std::lock_guard<std::mutex> lock(mutex_);
    const long slot = long(op) - long(vcclNumOps);
    if (slot < 0 || size_t(slot) >= entries_.size() || !entries_[size_t(slot)].live) {
        return set_last_error(vcclInvalidArgument, "%s: reduction op %d is neither built in nor a live PreMulSum op "
                              "of this communicator (vcclRedOpCreatePreMulSum)", fn, int(op));
    }
    const Entry& e = entries_[size_t(slot)];
    if (e.type != type) {
        return set_last_error(vcclInvalidArgument, "%s: PreMulSum op %d was made for %s, the call's datatype is %s",
                              fn, int(op), dtype_name(e.type), dtype_name(type));
    }
    *out = e.scalar;
    return vcclSuccess;
}

} // namespace vccl
