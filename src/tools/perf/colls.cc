/* vccl-perf: the geometry of each collective (counts, buffer sizes, bandwidth factors) and its vccl call. */
#include "tools/perf/perf.h"

namespace vperf {

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
    case Coll::AllReduce: return vcclAllReduce(cb.send, cb.recv, shape.count, o.dtype, o.op, comm, stream);
    case Coll::Broadcast: return vcclBroadcast(cb.send, cb.recv, shape.count, o.dtype, o.root, comm, stream);
    case Coll::Reduce: return vcclReduce(cb.send, cb.recv, shape.count, o.dtype, o.op, o.root, comm, stream);
    case Coll::AllGather: return vcclAllGather(cb.send, cb.recv, shape.count, o.dtype, comm, stream);
    case Coll::ReduceScatter:
        return vcclReduceScatter(cb.send, cb.recv, shape.count, o.dtype, o.op, comm, stream);
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
