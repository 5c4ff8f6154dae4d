/* SPDX-License-Identifier: BSD-3-Clause */
/* Collective and point-to-point entry points: argument checks, then hand-over to comm/enqueue. */
#include "api/check.h"
#include "comm/enqueue.h"
#include "core/status.h"
#include "device/memory.h"

using namespace vccl;

namespace {

/* The memory type of an operation: both buffers must agree (a NULL or unused buffer does not vote). */
vcclResult_t resolve_mem(const void* a, const void* b, MemType* mem, const char* fn) {
    MemType ta = a != nullptr ? mem_type_of(a) : MemType::Host;
    MemType tb = b != nullptr ? mem_type_of(b) : MemType::Host;
    if (a != nullptr && b != nullptr && ta != tb) {
        return set_last_error(vcclInvalidArgument, "%s: one buffer is in device memory and the other in host memory",
                              fn);
    }
    *mem = a != nullptr ? ta : tb;
    return vcclSuccess;
}

vcclResult_t collective(CollType coll, const void* sendbuf, void* recvbuf, size_t count, vcclDataType_t dtype,
                        vcclRedOp_t op, int root, vcclComm* comm, vcclStream_t stream, const char* fn) {
    VCCL_RETURN_IF_ERROR(check_comm(comm, fn));
    VCCL_RETURN_IF_ERROR(check_dtype(dtype, fn));
    bool reduces = coll == CollType::AllReduce || coll == CollType::Reduce || coll == CollType::ReduceScatter;
    // Op values from vcclNumOps on are the communicator's PreMulSum ops (algo/premul.h).
    const bool premul = reduces && int(op) >= int(vcclNumOps);
    PreMulScalar scalar;
    if (premul) {
        VCCL_RETURN_IF_ERROR(comm->premul_ops.lookup(op, dtype, fn, &scalar));
    } else if (reduces) {
        VCCL_RETURN_IF_ERROR(check_op(op, fn));
    }
    if (coll == CollType::Broadcast || coll == CollType::Reduce) VCCL_RETURN_IF_ERROR(check_rank(root, comm->nranks, "root", fn));

    size_t n = size_t(comm->nranks);
    size_t send_mult = 1, recv_mult = 1;
    switch (coll) {
    case CollType::AllGather: recv_mult = n; break;
    case CollType::ReduceScatter: send_mult = n; break;
    case CollType::AlltoAll: send_mult = recv_mult = n; break;
    default: break;
    }
    size_t send_bytes = 0, recv_bytes = 0;
    VCCL_RETURN_IF_ERROR(check_bytes(count, send_mult, dtype, &send_bytes, fn));
    VCCL_RETURN_IF_ERROR(check_bytes(count, recv_mult, dtype, &recv_bytes, fn));
    bool uses_send = coll != CollType::Broadcast || comm->rank == root;
    bool uses_recv = coll != CollType::Reduce || comm->rank == root;
    if (uses_send) VCCL_RETURN_IF_ERROR(check_buffer(sendbuf, send_bytes, "sendbuff", fn));
    if (uses_recv) VCCL_RETURN_IF_ERROR(check_buffer(recvbuf, recv_bytes, "recvbuff", fn));

    Op o{};
    o.kind = OpKind::Collective;
    o.comm = comm;
    o.stream = stream;
    VCCL_RETURN_IF_ERROR(resolve_mem(uses_send ? sendbuf : nullptr, uses_recv ? recvbuf : nullptr, &o.mem, fn));
    o.coll = CollArgs{coll, uses_send ? sendbuf : nullptr, uses_recv ? recvbuf : nullptr, count, dtype,
                      reduces ? op : vcclSum, root};
    o.premul = premul;
    o.premul_scalar = scalar;
    return enqueue(o);
}

vcclResult_t p2p(OpKind kind, const void* sendbuf, void* recvbuf, size_t count, vcclDataType_t dtype, int peer,
                 vcclComm* comm, vcclStream_t stream, const char* fn) {
    VCCL_RETURN_IF_ERROR(check_comm(comm, fn));
    VCCL_RETURN_IF_ERROR(check_dtype(dtype, fn));
    VCCL_RETURN_IF_ERROR(check_rank(peer, comm->nranks, "peer", fn));
    size_t bytes = 0;
    VCCL_RETURN_IF_ERROR(check_bytes(count, 1, dtype, &bytes, fn));
    const void* buf = kind == OpKind::Send ? sendbuf : recvbuf;
    VCCL_RETURN_IF_ERROR(check_buffer(buf, bytes, kind == OpKind::Send ? "sendbuff" : "recvbuff", fn));
    Op o{};
    o.kind = kind;
    o.comm = comm;
    o.stream = stream;
    o.mem = buf != nullptr ? mem_type_of(buf) : MemType::Host;
    o.sendbuf = sendbuf;
    o.recvbuf = recvbuf;
    o.bytes = bytes;
    o.peer = peer;
    return enqueue(o);
}

} // namespace

extern "C" VCCL_EXPORT vcclResult_t vcclAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                                                  vcclDataType_t datatype, vcclRedOp_t op, vcclComm_t comm,
                                                  vcclStream_t stream) {
    return collective(CollType::AllReduce, sendbuff, recvbuff, count, datatype, op, 0, comm, stream,
                      "vcclAllReduce");
}

extern "C" VCCL_EXPORT vcclResult_t vcclBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                                                  vcclDataType_t datatype, int root, vcclComm_t comm,
                                                  vcclStream_t stream) {
    return collective(CollType::Broadcast, sendbuff, recvbuff, count, datatype, vcclSum, root, comm, stream,
                      "vcclBroadcast");
}

extern "C" VCCL_EXPORT vcclResult_t vcclReduce(const void* sendbuff, void* recvbuff, size_t count,
                                               vcclDataType_t datatype, vcclRedOp_t op, int root, vcclComm_t comm,
                                               vcclStream_t stream) {
    return collective(CollType::Reduce, sendbuff, recvbuff, count, datatype, op, root, comm, stream, "vcclReduce");
}

extern "C" VCCL_EXPORT vcclResult_t vcclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                                                  vcclDataType_t datatype, vcclComm_t comm, vcclStream_t stream) {
    return collective(CollType::AllGather, sendbuff, recvbuff, sendcount, datatype, vcclSum, 0, comm, stream,
                      "vcclAllGather");
}

extern "C" VCCL_EXPORT vcclResult_t vcclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                                                      vcclDataType_t datatype, vcclRedOp_t op, vcclComm_t comm,
                                                      vcclStream_t stream) {
    return collective(CollType::ReduceScatter, sendbuff, recvbuff, recvcount, datatype, op, 0, comm, stream,
                      "vcclReduceScatter");
}

extern "C" VCCL_EXPORT vcclResult_t vcclAlltoAll(const void* sendbuff, void* recvbuff, size_t count,
                                                 vcclDataType_t datatype, vcclComm_t comm, vcclStream_t stream) {
    return collective(CollType::AlltoAll, sendbuff, recvbuff, count, datatype, vcclSum, 0, comm, stream,
                      "vcclAlltoAll");
}

extern "C" VCCL_EXPORT vcclResult_t vcclSend(const void* sendbuff, size_t count, vcclDataType_t datatype, int peer,
                                             vcclComm_t comm, vcclStream_t stream) {
    return p2p(OpKind::Send, sendbuff, nullptr, count, datatype, peer, comm, stream, "vcclSend");
}

extern "C" VCCL_EXPORT vcclResult_t vcclRecv(void* recvbuff, size_t count, vcclDataType_t datatype, int peer,
                                             vcclComm_t comm, vcclStream_t stream) {
    return p2p(OpKind::Recv, nullptr, recvbuff, count, datatype, peer, comm, stream, "vcclRecv");
}

extern "C" VCCL_EXPORT vcclResult_t vcclRedOpCreatePreMulSum(vcclRedOp_t* op, void* scalar, vcclDataType_t datatype,
                                                             vcclScalarResidence_t residence, vcclComm_t comm) {
    VCCL_RETURN_IF_ERROR(check_comm(comm, "vcclRedOpCreatePreMulSum"));
    // The GPU whose kernels will read a device scalar: the direct path's, else (staging) the one current now.
    int device = comm->dev.ipc != nullptr ? comm->dev.ipc->device() : -1;
    if (device < 0 && residence == vcclScalarDevice && !stream_device(nullptr, &device)) device = -1;
    return comm->premul_ops.create(scalar, datatype, residence, device, op);
}

extern "C" VCCL_EXPORT vcclResult_t vcclRedOpDestroy(vcclRedOp_t op, vcclComm_t comm) {
    VCCL_RETURN_IF_ERROR(check_comm(comm, "vcclRedOpDestroy"));
    return comm->premul_ops.destroy(op);
}
