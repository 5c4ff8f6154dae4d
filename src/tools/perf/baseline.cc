/* SPDX-License-Identifier: BSD-3-Clause */
/* vccl-perf: --baseline mpi runs the same collective through MPI on the same buffers. */
#include <cstring>

#include "tools/perf/perf.h"

namespace vperf {

namespace {

MPI_Datatype mpi_type(vcclDataType_t t) {
    switch (t) {
    case vcclInt8: return MPI_INT8_T;
    case vcclUint8: return MPI_UINT8_T;
    case vcclInt32: return MPI_INT32_T;
    case vcclUint32: return MPI_UINT32_T;
    case vcclInt64: return MPI_INT64_T;
    case vcclUint64: return MPI_UINT64_T;
    case vcclFloat32: return MPI_FLOAT;
    case vcclFloat64: return MPI_DOUBLE;
    default: return MPI_DATATYPE_NULL; // half and bfloat16 have no standard MPI type
    }
}

MPI_Op mpi_op(vcclRedOp_t op) {
    switch (op) {
    case vcclSum: return MPI_SUM;
    case vcclProd: return MPI_PROD;
    case vcclMax: return MPI_MAX;
    case vcclMin: return MPI_MIN;
    default: return MPI_OP_NULL; // avg has no MPI operation
    }
}

/* MPI counts are int. */
bool fits_int(size_t n) { return n <= size_t(2147483647); }

} // namespace

const char* mpi_baseline_unsupported(const Options& o) {
    if (o.memory == Memory::Cuda) return "device buffers: this MPI baseline passes host memory only";
    if (mpi_type(o.dtype) == MPI_DATATYPE_NULL) return "MPI has no standard type for this datatype";
    if (coll_has_op(o.coll) && mpi_op(o.op) == MPI_OP_NULL) return "MPI has no average operation";
    return nullptr;
}

int run_mpi(const Options& o, const Shape& shape, const CallBuffers& cb, MPI_Comm comm, int rank, int nranks) {
    MPI_Datatype t = mpi_type(o.dtype);
    MPI_Op op = mpi_op(o.op);
    if (!fits_int(shape.send_elems) || !fits_int(shape.recv_elems)) return MPI_ERR_COUNT;
    int count = int(shape.count);
    void* send = const_cast<void*>(cb.send);
    switch (o.coll) {
    case Coll::AllReduce: return MPI_Allreduce(send, cb.recv, count, t, op, comm);
    case Coll::Broadcast: {
        /* MPI_Bcast works in one buffer: the root's input is copied into it first, as vccl does. */
        if (rank == o.root && send != cb.recv) memcpy(cb.recv, send, shape.count * type_size(o.dtype));
        return MPI_Bcast(cb.recv, count, t, o.root, comm);
    }
    case Coll::Reduce: return MPI_Reduce(send, cb.recv, count, t, op, o.root, comm);
    case Coll::AllGather: return MPI_Allgather(send, count, t, cb.recv, count, t, comm);
    case Coll::ReduceScatter: return MPI_Reduce_scatter_block(send, cb.recv, count, t, op, comm);
    case Coll::AlltoAll: return MPI_Alltoall(send, count, t, cb.recv, count, t, comm);
    case Coll::SendRecv: {
        int next = (rank + 1) % nranks;
        int prev = (rank + nranks - 1) % nranks;
        return MPI_Sendrecv(send, count, t, next, 0, cb.recv, count, t, prev, 0, comm, MPI_STATUS_IGNORE);
    }
    }
    return MPI_ERR_OTHER;
}

} // namespace vperf
