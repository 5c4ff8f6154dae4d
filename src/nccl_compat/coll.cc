/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * libvccl-nccl: collectives, point-to-point and groups. Datatypes and operations have the same values in
 * NCCL and vccl (abi_asserts.h proves it), FP8 included; what vccl lacks (group simulation) is refused with
 * ncclInvalidUsage. Stream semantics are vccl's: see vccl.h.
 */
#include "core/names.h"
#include "nccl_compat/compat.h"

using namespace vccl::nccl_compat;

namespace {

vcclStream_t vstream(vncclStream_t s) { return reinterpret_cast<vcclStream_t>(s); }

/* lookup + datatype (+ op when given) in one step. */
ncclResult_t prepare(ncclComm_t comm, ncclDataType_t t, const ncclRedOp_t* op, const char* fn, vcclComm_t* vc,
                     vcclDataType_t* vt, vcclRedOp_t* vop) {
    ncclResult_t r = lookup(comm, fn, vc);
    if (r == ncclSuccess) r = map_dtype(t, fn, vt);
    if (r == ncclSuccess && op != nullptr) r = map_op(*op, fn, vop);
    return r;
}

/* Gather (to_root) or scatter (from root) as a group of point-to-point calls. */
ncclResult_t rooted_p2p(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                        ncclComm_t comm, vncclStream_t stream, bool gather, const char* fn) {
    vcclComm_t vc = nullptr;
    vcclDataType_t t = vcclFloat;
    vcclRedOp_t unused = vcclSum;
    ncclResult_t r = prepare(comm, datatype, nullptr, fn, &vc, &t, &unused);
    if (r != ncclSuccess) return r;
    int rank = 0, nranks = 0;
    if ((r = to_nccl(vcclCommUserRank(vc, &rank))) != ncclSuccess) return r;
    if ((r = to_nccl(vcclCommCount(vc, &nranks))) != ncclSuccess) return r;
    if (root < 0 || root >= nranks) return fail(ncclInvalidArgument, "%s: root %d is not in [0, %d)", fn, root, nranks);
    const size_t block = count * vccl::dtype_size(t);
    if (count != 0 && block / count != vccl::dtype_size(t)) return fail(ncclInvalidArgument, "%s: count %zu overflows", fn, count);
    vcclGroupStart();
    vcclResult_t v = vcclSuccess;
    if (gather) {
        if (rank == root) {
            for (int p = 0; p < nranks && v == vcclSuccess; ++p)
                v = vcclRecv(static_cast<char*>(recvbuff) + size_t(p) * block, count, t, p, vc, vstream(stream));
        }
        if (v == vcclSuccess) v = vcclSend(sendbuff, count, t, root, vc, vstream(stream));
    } else {
        if (rank == root) {
            for (int p = 0; p < nranks && v == vcclSuccess; ++p)
                v = vcclSend(static_cast<const char*>(sendbuff) + size_t(p) * block, count, t, p, vc, vstream(stream));
        }
        if (v == vcclSuccess) v = vcclRecv(recvbuff, count, t, root, vc, vstream(stream));
    }
    vcclResult_t e = vcclGroupEnd();
    return to_nccl(v != vcclSuccess ? v : e);
}

} // namespace

extern "C" {

VNCCL_API(ncclResult_t, ncclAllReduce, const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
          ncclRedOp_t op, ncclComm_t comm, vncclStream_t stream) {
    vcclComm_t vc = nullptr;
    vcclDataType_t t = vcclFloat;
    vcclRedOp_t o = vcclSum;
    ncclResult_t r = prepare(comm, datatype, &op, "ncclAllReduce", &vc, &t, &o);
    return r != ncclSuccess ? r : to_nccl(vcclAllReduce(sendbuff, recvbuff, count, t, o, vc, vstream(stream)));
}

VNCCL_API(ncclResult_t, ncclReduce, const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
          ncclRedOp_t op, int root, ncclComm_t comm, vncclStream_t stream) {
    vcclComm_t vc = nullptr;
    vcclDataType_t t = vcclFloat;
    vcclRedOp_t o = vcclSum;
    ncclResult_t r = prepare(comm, datatype, &op, "ncclReduce", &vc, &t, &o);
    return r != ncclSuccess ? r : to_nccl(vcclReduce(sendbuff, recvbuff, count, t, o, root, vc, vstream(stream)));
}

VNCCL_API(ncclResult_t, ncclBroadcast, const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
          int root, ncclComm_t comm, vncclStream_t stream) {
    vcclComm_t vc = nullptr;
    vcclDataType_t t = vcclFloat;
    vcclRedOp_t unused = vcclSum;
    ncclResult_t r = prepare(comm, datatype, nullptr, "ncclBroadcast", &vc, &t, &unused);
    return r != ncclSuccess ? r : to_nccl(vcclBroadcast(sendbuff, recvbuff, count, t, root, vc, vstream(stream)));
}

/* In-place broadcast (NCCL's legacy spelling). */
VNCCL_API(ncclResult_t, ncclBcast, void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
          vncclStream_t stream) {
    return ncclBroadcast(buff, buff, count, datatype, root, comm, stream);
}

VNCCL_API(ncclResult_t, ncclAllGather, const void* sendbuff, void* recvbuff, size_t sendcount,
          ncclDataType_t datatype, ncclComm_t comm, vncclStream_t stream) {
    vcclComm_t vc = nullptr;
    vcclDataType_t t = vcclFloat;
    vcclRedOp_t unused = vcclSum;
    ncclResult_t r = prepare(comm, datatype, nullptr, "ncclAllGather", &vc, &t, &unused);
    return r != ncclSuccess ? r : to_nccl(vcclAllGather(sendbuff, recvbuff, sendcount, t, vc, vstream(stream)));
}

VNCCL_API(ncclResult_t, ncclReduceScatter, const void* sendbuff, void* recvbuff, size_t recvcount,
          ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm, vncclStream_t stream) {
    vcclComm_t vc = nullptr;
    vcclDataType_t t = vcclFloat;
    vcclRedOp_t o = vcclSum;
    ncclResult_t r = prepare(comm, datatype, &op, "ncclReduceScatter", &vc, &t, &o);
    return r != ncclSuccess ? r
                            : to_nccl(vcclReduceScatter(sendbuff, recvbuff, recvcount, t, o, vc, vstream(stream)));
}

VNCCL_API(ncclResult_t, ncclAlltoAll, const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
          ncclComm_t comm, vncclStream_t stream) {
    vcclComm_t vc = nullptr;
    vcclDataType_t t = vcclFloat;
    vcclRedOp_t unused = vcclSum;
    ncclResult_t r = prepare(comm, datatype, nullptr, "ncclAlltoAll", &vc, &t, &unused);
    return r != ncclSuccess ? r : to_nccl(vcclAlltoAll(sendbuff, recvbuff, count, t, vc, vstream(stream)));
}

VNCCL_API(ncclResult_t, ncclGather, const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
          int root, ncclComm_t comm, vncclStream_t stream) {
    return rooted_p2p(sendbuff, recvbuff, count, datatype, root, comm, stream, true, "ncclGather");
}

VNCCL_API(ncclResult_t, ncclScatter, const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
          int root, ncclComm_t comm, vncclStream_t stream) {
    return rooted_p2p(sendbuff, recvbuff, count, datatype, root, comm, stream, false, "ncclScatter");
}

VNCCL_API(ncclResult_t, ncclSend, const void* sendbuff, size_t count, ncclDataType_t datatype, int peer,
          ncclComm_t comm, vncclStream_t stream) {
    vcclComm_t vc = nullptr;
    vcclDataType_t t = vcclFloat;
    vcclRedOp_t unused = vcclSum;
    ncclResult_t r = prepare(comm, datatype, nullptr, "ncclSend", &vc, &t, &unused);
    return r != ncclSuccess ? r : to_nccl(vcclSend(sendbuff, count, t, peer, vc, vstream(stream)));
}

VNCCL_API(ncclResult_t, ncclRecv, void* recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
          vncclStream_t stream) {
    vcclComm_t vc = nullptr;
    vcclDataType_t t = vcclFloat;
    vcclRedOp_t unused = vcclSum;
    ncclResult_t r = prepare(comm, datatype, nullptr, "ncclRecv", &vc, &t, &unused);
    return r != ncclSuccess ? r : to_nccl(vcclRecv(recvbuff, count, t, peer, vc, vstream(stream)));
}

VNCCL_API(ncclResult_t, ncclGroupSimulateEnd, ncclSimInfo_t* simInfo) {
    return unsupported("ncclGroupSimulateEnd", "vccl has no performance model to simulate with");
}

VNCCL_API(ncclResult_t, ncclRedOpCreatePreMulSum, ncclRedOp_t* op, void* scalar, ncclDataType_t datatype,
          ncclScalarResidence_t residence, ncclComm_t comm) {
    vcclComm_t vc = nullptr;
    vcclDataType_t t = vcclFloat;
    ncclResult_t r = prepare(comm, datatype, nullptr, "ncclRedOpCreatePreMulSum", &vc, &t, nullptr);
    if (r != ncclSuccess) return r;
    if (op == nullptr) return fail(ncclInvalidArgument, "ncclRedOpCreatePreMulSum: op is NULL");
    static_assert(int(ncclScalarDevice) == int(vcclScalarDevice) &&
                      int(ncclScalarHostImmediate) == int(vcclScalarHostImmediate),
                  "ncclScalarResidence_t is passed through");
    vcclRedOp_t made = vcclSum;
    r = to_nccl(vcclRedOpCreatePreMulSum(&made, scalar, t, vcclScalarResidence_t(int(residence)), vc));
    if (r == ncclSuccess) *op = ncclRedOp_t(int(made));
    return r;
}

VNCCL_API(ncclResult_t, ncclRedOpDestroy, ncclRedOp_t op, ncclComm_t comm) {
    vcclComm_t vc = nullptr;
    vcclDataType_t t = vcclFloat;
    ncclResult_t r = prepare(comm, ncclFloat, nullptr, "ncclRedOpDestroy", &vc, &t, nullptr);
    return r != ncclSuccess ? r : to_nccl(vcclRedOpDestroy(vcclRedOp_t(int(op)), vc));
}

} // extern "C"
