/*
 * PreMulSum operations (vcclRedOpCreatePreMulSum, NCCL's ncclRedOpCreatePreMulSum): out = sum over ranks r of
 * scalar_r * in_r. A communicator keeps a table of the ops it created; op values from vcclNumOps on index it.
 *
 * A call with such an op is run as a Sum. Where the collective reads its input in kernels of its own, they multiply
 * it there (PreMulPlan in comm/device_coll.h): the direct path's low-latency and chunked kernels scale every element
 * they read (no extra pass), and its copy-engine AllReduce and ReduceScatter scale this rank's own block in their
 * reduction kernel, reading the blocks they send the peers from a copy scaled beforehand (a pass over (n - 1) / n of
 * the input). Everywhere else (staging, the host transport, the direct path's small-size AllReduce and Reduce, which
 * send the whole input) the collective reads a scaled copy of all of it: the call multiplies the input by the rank's
 * scalar into scratch memory first (device buffers: one small kernel on the call's stream, reading a vcclScalarDevice
 * scalar there; host buffers: on the calling thread, after the stream). The copy lives in memory the communicator
 * keeps between calls (device) or for the call (host); calls reuse it in stream order, as the other scratch buffers.
 * The bits are the same either way: a fused kernel rounds each product to the type as the copy would hold it.
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

/* The scaled inputs of one call's PreMulSum collectives: device regions side by side in the communicator's
 * scratch, host copies alive until the call returns. */
struct PreMulCall {
    char* device_base = nullptr;
    size_t device_at = 0;
    std::vector<std::vector<unsigned char>> host_copies;
};

/* Before a call (of `comm`, under its operation lock, after its stream order was taken) runs `ops`: the device
 * scratch for all its scaled copies (one growth at most per call; nothing when it needs none). `staged`: the call's
 * collectives go to the staging queue, not to the direct path. */
vcclResult_t premul_reserve(vcclComm* comm, const std::vector<Op>& ops, bool staged, PreMulCall* call);
/* Right before `op` runs (so a group's calls see each other's results in issue order): rewrites a PreMulSum
 * collective into a Sum, over a scaled copy of its input or (direct path) leaving the kernels to scale, as the header
 * says. `staged` as for premul_reserve. */
vcclResult_t premul_apply(vcclComm* comm, Op* op, bool staged, PreMulCall* call);

} // namespace vccl

#endif
