/*
 * PreMulSum operations (vcclRedOpCreatePreMulSum, NCCL's ncclRedOpCreatePreMulSum): out = sum over ranks r of
 * scalar_r * in_r. A communicator keeps a table of the ops it created; op values from vcclNumOps on index it.
 *
 * A call with such an op is run as a Sum over a scaled copy of its input: before its collective, the call
 * multiplies the input by the rank's scalar into scratch memory (device buffers: one small kernel on the call's
 * stream, reading a vcclScalarDevice scalar there; host buffers: on the calling thread, after the stream) and
 * hands the collective that copy. Every algorithm and path (direct kernels, copy engines, staging, the host
 * transport) then needs nothing of its own for it, at the price of one more pass over the input; NCCL fuses the
 * multiplication into its reduction instead. The copy lives in memory the communicator keeps between calls
 * (device) or for the call (host); calls reuse it in stream order, as the other scratch buffers.
 */
#ifndef VCCL_COMM_PREMUL_H_
#define VCCL_COMM_PREMUL_H_

#include <cstdint>
#include <mutex>
#include <vector>

#include "vccl.h"

namespace vccl {

struct Op;

/* A call's copy of its op's scalar (the op may be destroyed before a group ends). */
struct PreMulScalar {
    bool on_device = false;          // vcclScalarDevice: read through device_ptr when the call runs
    const void* device_ptr = nullptr;
    uint64_t host_bits = 0;          // vcclScalarHostImmediate: the element, in its low bytes
};

/* The ops one communicator created. Thread-safe: creation may race with calls on other threads. */
class PreMulOps {
public:
    /* Most ops one communicator holds at once (NCCL has no fixed limit; a program that leaks them is told). */
    static constexpr size_t kMaxOps = 1u << 16;

    vcclResult_t create(void* scalar, vcclDataType_t type, vcclScalarResidence_t residence, vcclRedOp_t* out);
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

/* The scaled inputs of one call's PreMulSum collectives: device regions side by side in the communicator's
 * scratch, host copies alive until the call returns. */
struct PreMulCall {
    char* device_base = nullptr;
    size_t device_at = 0;
    std::vector<std::vector<unsigned char>> host_copies;
};

/* Before a call (of `comm`, under its operation lock, after its stream order was taken) runs `ops`: the device
 * scratch for all its PreMulSum inputs (one growth at most per call; nothing when it has none). */
vcclResult_t premul_reserve(vcclComm* comm, const std::vector<Op>& ops, PreMulCall* call);
/* Right before `op` runs (so a group's calls see each other's results in issue order): rewrites a PreMulSum
 * collective into a Sum over its input multiplied by the scalar, as the header says. */
vcclResult_t premul_apply(vcclComm* comm, Op* op, PreMulCall* call);

} // namespace vccl

#endif
