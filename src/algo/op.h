/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * One operation of a call, as the API hands it over: validated, with memory types resolved. A collective (its
 * arguments in CollArgs) or one side of a send/recv. Outside a group an operation runs at once; inside one it is
 * kept until vcclGroupEnd (comm/group.h).
 */
#ifndef VCCL_ALGO_OP_H_
#define VCCL_ALGO_OP_H_

#include <cstdint>

#include "algo/algo.h"
#include "transport/transfer.h"
#include "transport/transport.h"
#include "vccl.h"

struct vcclComm;

namespace vccl {

/* A call's copy of its PreMulSum op's scalar (the op may be destroyed before a group ends). */
struct PreMulScalar {
    bool on_device = false;          // vcclScalarDevice: read through device_ptr when the call runs
    const void* device_ptr = nullptr;
    uint64_t host_bits = 0;          // vcclScalarHostImmediate: the element, in its low bytes
};

enum class OpKind { Collective, Send, Recv };

struct Op {
    OpKind kind;
    vcclComm* comm;
    vcclStream_t stream;
    MemType mem;
    CollArgs coll;          // Collective
    const void* sendbuf;    // Send
    void* recvbuf;          // Recv
    size_t bytes;           // Send / Recv
    int peer;               // Send / Recv
    bool premul;            // Collective: coll.op is a PreMulSum op, whose scalar is premul_scalar (algo/premul.h)
    PreMulScalar premul_scalar;
    // Once premul_apply ran, premul stays set (coll.op is then vcclSum) only where the direct device path scales
    // (PreMulPlan, algo/device/device_algo.h): with this NULL, its kernel scales all it reads (Kernel); else this is
    // the caller's input, whose own block the reduction scales as it reads it, and coll.sendbuf a copy scaled
    // elsewhere (OwnBlock).
    const void* premul_own_input;
    bool captured;          // the call's stream is being captured into a CUDA graph (algo/device/device_coll.h)
};

/* The transfer a Send or Recv op is. */
inline Transfer op_transfer(const Op& op) {
    Transfer t;
    t.kind = op.kind == OpKind::Send ? Transfer::Send : Transfer::Recv;
    t.peer = op.peer;
    t.mem = op.mem;
    t.stream = op.stream;
    t.sendbuf = op.sendbuf;
    t.recvbuf = op.recvbuf;
    t.bytes = op.bytes;
    t.captured = op.captured;
    return t;
}

} // namespace vccl

#endif
