/*
 * Operations as the API hands them over: validated, with memory types resolved. Outside a group an
 * operation runs at once; inside one it is kept until vcclGroupEnd.
 */
#ifndef VCCL_COMM_ENQUEUE_H_
#define VCCL_COMM_ENQUEUE_H_

#include <vector>

#include "algo/algo.h"
#include "comm/comm.h"
#include "transport/transport.h"

namespace vccl {

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
    // Send on the direct device path: the peer's receive buffer is known to be free, because this stream already
    // waited for something the peer's stream did after it reached this transfer's collective (the all-gather of an
    // AllReduce, after the reduce-scatter's DONE waits): the READY wait is left out (IpcP2p::post_send).
    bool peer_buffer_free;
    bool premul;            // Collective: coll.op is a PreMulSum op, whose scalar is premul_scalar (comm/premul.h)
    PreMulScalar premul_scalar;
    // Once premul_apply ran, premul stays set (coll.op is then vcclSum) only where the direct device path scales
    // (PreMulPlan, device_coll.h): with this NULL, its kernel scales all it reads (Kernel); else this is the caller's
    // input, whose own block the reduction scales as it reads it, and coll.sendbuf a copy scaled elsewhere (OwnBlock).
    const void* premul_own_input;
};

/* Runs op now, or adds it to the calling thread's open group. */
vcclResult_t enqueue(const Op& op);

/* Runs one communicator's share of a group: its collectives in posting order, then all its sends and
 * receives together (posted at once, so no order of peers can deadlock). */
vcclResult_t run_comm_ops(vcclComm* comm, const std::vector<Op>& ops);

/* Waits for `stream` where a call must (host buffers with a stream, synchronous staging). Every 10 ms of
 * waiting it looks whether the wait can still end: vcclCommAbort on another thread (which needs this call's
 * lock) and, on a communicator with the direct device path, a failed peer (failed_peer_polled: the stream
 * may wait for that peer's flags, which never come); vcclRemoteError then, the communicator failed as
 * vcclCommGetAsyncError would find it. Work the call enqueued before the wait stays queued, so what it
 * writes must not be the caller's memory (p2p_exec.cc lands FIFO receives into host memory in pinned memory
 * of the communicator's, and copies them out after this wait). */
vcclResult_t comm_stream_wait(vcclComm* comm, vcclStream_t stream);
/* The same for device work: a NULL `stream` is CUDA's legacy default stream, which is waited for too (the plain
 * version skips NULL, which host-memory calls pass and where no GPU may be current). */
vcclResult_t comm_device_stream_wait(vcclComm* comm, vcclStream_t stream);

} // namespace vccl

#endif
