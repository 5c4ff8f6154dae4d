/* SPDX-License-Identifier: BSD-3-Clause */
/* vccl-perf: the geometry of each collective (counts, buffer sizes, bandwidth factors) and its vccl call. */
#include "tools/perf/perf.h"

#include <cstdio>
#include <cstring>
#include <tuple>
#include <vector>

namespace vperf {

uint64_t one_element_bits(vcclDataType_t type) {
    switch (type) {
    case vcclFloat16: return 0x3c00u;
    case vcclBfloat16: return 0x3f80u;
    case vcclFloat8e4m3: return 0x38u;
    case vcclFloat8e5m2: return 0x3cu;
    case vcclFloat32: {
        const float f = 1.0f;
        uint32_t bits;
        memcpy(&bits, &f, sizeof bits);
        return bits;
    }
    case vcclFloat64: {
        const double d = 1.0;
        uint64_t bits;
        memcpy(&bits, &d, sizeof bits);
        return bits;
    }
    default: return 1; // the integers, little-endian
    }
}

namespace {

/* -o premulsum: the PreMulSum op of scalar 1 of `comm` and the run's datatype, made on first use (a run keeps its
 * communicators). An op no communicator has when it cannot be made: the call then says so. */
vcclRedOp_t vccl_op(const Options& o, vcclComm_t comm) {
    if (!o.premul) return o.op;
    static std::vector<std::tuple<vcclComm_t, vcclDataType_t, vcclRedOp_t>> made;
    for (const auto& m : made) {
        if (std::get<0>(m) == comm && std::get<1>(m) == o.dtype) return std::get<2>(m);
    }
    uint64_t one = one_element_bits(o.dtype);
    vcclRedOp_t op = vcclMaxRedOp;
    if (vcclRedOpCreatePreMulSum(&op, &one, o.dtype, vcclScalarHostImmediate, comm) != vcclSuccess) {
        fprintf(stderr, "vccl-perf: vcclRedOpCreatePreMulSum failed: %s\n", vcclGetLastError(comm));
        return vcclMaxRedOp;
    }
    made.emplace_back(comm, o.dtype, op);
    return op;
}

} // namespace

Shape make_shape(Coll coll, size_t bytes, vcclDataType_t type, int nranks) {
    size_t ts = type_size(type);
    size_t n = size_t(nranks);
    Shape s;
    switch (coll) {
    case Coll::AllGather:
        s.count = bytes / (ts * n);
        s.send_elems = s.count;
        s.recv_elems = s.count * n;
        s.total_count = s.count * n;
        break;
    case Coll::ReduceScatter:
        s.count = bytes / (ts * n);
        s.send_elems = s.count * n;
        s.recv_elems = s.count;
        s.total_count = s.count * n;
        break;
    case Coll::AlltoAll:
        s.count = bytes / (ts * n);
        s.send_elems = s.count * n;
        s.recv_elems = s.count * n;
        s.total_count = s.count * n;
        break;
    default:
        s.count = bytes / ts;
        s.send_elems = s.count;
        s.recv_elems = s.count;
        s.total_count = s.count;
        break;
    }
    s.bytes = s.total_count * ts;
    return s;
}

double bus_factor(Coll coll, int nranks) {
    double n = nranks;
    switch (coll) {
    case Coll::AllReduce: return 2.0 * (n - 1) / n;
    case Coll::AllGather:
    case Coll::ReduceScatter:
    case Coll::AlltoAll: return (n - 1) / n;
    default: return 1.0;
    }
}

CallBuffers call_buffers(Coll coll, const Buffers& buf, const Shape& shape, int rank, bool in_place) {
    if (!in_place) return {buf.send(), buf.recv()};
    char* base = static_cast<char*>(buf.recv());
    size_t block = size_t(rank) * shape.count * type_size(buf.type());
    switch (coll) {
    case Coll::AllGather: return {base + block, base};     // input is block `rank` of the output
    case Coll::ReduceScatter: return {base, base + block}; // output is block `rank` of the input
    default: return {base, base};
    }
}

vcclResult_t run_vccl(const Options& o, const Shape& shape, const CallBuffers& cb, vcclComm_t comm, int rank,
                      int nranks, void* stream) {
    switch (o.coll) {
    case Coll::AllReduce: return vcclAllReduce(cb.send, cb.recv, shape.count, o.dtype, vccl_op(o, comm), comm, stream);
    case Coll::Broadcast: return vcclBroadcast(cb.send, cb.recv, shape.count, o.dtype, o.root, comm, stream);
    case Coll::Reduce: return vcclReduce(cb.send, cb.recv, shape.count, o.dtype, vccl_op(o, comm), o.root, comm, stream);
    case Coll::AllGather: return vcclAllGather(cb.send, cb.recv, shape.count, o.dtype, comm, stream);
    case Coll::ReduceScatter:
        return vcclReduceScatter(cb.send, cb.recv, shape.count, o.dtype, vccl_op(o, comm), comm, stream);
    case Coll::AlltoAll: return vcclAlltoAll(cb.send, cb.recv, shape.count, o.dtype, comm, stream);
    case Coll::SendRecv: {
        int next = (rank + 1) % nranks;
        int prev = (rank + nranks - 1) % nranks;
        vcclResult_t r = vcclGroupStart();
        if (r != vcclSuccess) return r;
        vcclResult_t rs = vcclSend(cb.send, shape.count, o.dtype, next, comm, stream);
        vcclResult_t rr = vcclRecv(cb.recv, shape.count, o.dtype, prev, comm, stream);
        r = vcclGroupEnd(); // always close the group, even when a call inside it failed
        if (rs != vcclSuccess) return rs;
        if (rr != vcclSuccess) return rr;
        return r;
    }
    }
    return vcclInvalidArgument;
}

} // namespace vperf
