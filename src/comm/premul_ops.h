/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * PreMulSum ops (vcclRedOpCreatePreMulSum, NCCL's ncclRedOpCreatePreMulSum): out = sum over ranks r of
 * scalar_r * in_r. A communicator keeps a table of the ops it created; op values from vcclNumOps on index it. How a
 * call with such an op runs: algo/premul.h.
 */
#ifndef VCCL_COMM_PREMUL_OPS_H_
#define VCCL_COMM_PREMUL_OPS_H_

#include <cstdint>
#include <mutex>
#include <vector>

#include "algo/op.h"
#include "vccl.h"

namespace vccl {

/* The ops one communicator created. Thread-safe: creation may race with calls on other threads. */
class PreMulOps {
public:
    /* Most ops one communicator holds at once (NCCL has no fixed limit; a program that leaks them is told). */
    static constexpr size_t kMaxOps = 1u << 16;

    /* comm_device: the communicator's GPU, where a vcclScalarDevice scalar must live (the kernels of its calls read
     * it there; another GPU's memory may not be readable from them); -1: not checked. */
    vcclResult_t create(void* scalar, vcclDataType_t type, vcclScalarResidence_t residence, int comm_device,
                        vcclRedOp_t* out);
    vcclResult_t destroy(vcclRedOp_t op);
    /* The scalar of `op` for a call on `type`; a clear error when op is not a live op of this table or was
     * made for another datatype. `fn`: the API call, for the message. */
    vcclResult_t lookup(vcclRedOp_t op, vcclDataType_t type, const char* fn, PreMulScalar* out) const;

private:
    struct Entry {
        bool live = false;
        vcclDataType_t type = vcclFloat32;
        PreMulScalar scalar;
    };
    mutable std::mutex mutex_;
    std::vector<Entry> entries_; // op vcclNumOps + i is entries_[i]
};

} // namespace vccl

#endif
