#include "comm/enqueue.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>

#include "comm/device_coll.h"
#include "comm/group.h"
#include "comm/p2p_exec.h"
#include "core/dtype.h"
#include "core/log.h"
#include "core/status.h"
#include "device/memory.h"
#include "device/staging.h"

namespace vccl {

namespace {

vcclResult_t run_collective(vcclComm* comm, const Op& op) {
    const Algorithm* algo = algo_select(op.coll, comm->nranks, comm->settings);
    if (algo == nullptr) {
        return set_last_error(vcclInternalError, "no algorithm for %s", coll_name(op.coll.coll));
    }
    uint64_t seq = comm->coll_seq++;
    VCCL_TRACE(kLogColl, "%s: rank %d %s #%llu count %zu %s via %s", comm->name.c_str(), comm->rank,
               coll_name(op.coll.coll), (unsigned long long)seq, op.coll.count, dtype_name(op.coll.dtype),
               algo->name);
    vcclResult_t status;
    {
        ScopedTransferTag telemetry_tag(comm->transport.get(), {uint8_t(1 + int(op.coll.coll)), seq});
        CollCtx ctx(comm->transport.get(), comm->rank, comm->nranks, coll_tag(seq), op.coll.dtype, op.coll.op,
                    comm->settings, &comm->aborted, &comm->scratch);
        status = algo->run(ctx, op.coll);
    }
    comm->scratch.reset();
    return status;
}

/* Bytes a collective reads from sendbuf and writes to recvbuf on this rank. */
void coll_io_bytes(const vcclComm* comm, const CollArgs& a, size_t* in, size_t* out) {
    size_t block = a.count * dtype_size(a.dtype), n = size_t(comm->nranks);
    switch (a.coll) {
    case CollType::AllReduce: *in = block; *out = block; break;
    case CollType::Broadcast: *in = comm->rank == a.root ? block : 0; *out = block; break;
    case CollType::Reduce: *in = block; *out = comm->rank == a.root ? block : 0; break;
    case CollType::AllGather: *in = block; *out = block * n; break;
    case CollType::ReduceScatter: *in = block * n; *out = block; break;
    default: *in = block * n; *out = block * n; break;
    }
}

bool inside(const void* p, const void* base, size_t bytes) {
    auto x = reinterpret_cast<uintptr_t>(p), b = reinterpret_cast<uintptr_t>(base);
    return p != nullptr && base != nullptr && x >= b && x < b + bytes;
}

/* Runs a collective on device buffers through pinned host copies, keeping in-place aliasing. */
vcclResult_t run_collective_staged(vcclComm* comm, const Op& op) {
    size_t in = 0, out = 0;
    coll_io_bytes(comm, op.coll, &in, &out);
    void* host = nullptr;
    VCCL_RETURN_IF_ERROR(comm->staging.get(in + out, &host));
    char* h = static_cast<char*>(host);
    const char* dsend = static_cast<const char*>(op.coll.sendbuf);
    char* drecv = static_cast<char*>(op.coll.recvbuf);
    char* hsend = h;
    char* hrecv = h + in;
    // In place, the smaller region lives inside the larger one (both may start at the same address):
    // place the smaller one inside the larger one's staging copy.
    if (in >= out && inside(drecv, dsend, in)) {
        hrecv = hsend + (drecv - dsend); // e.g. ReduceScatter: the output block inside the input
    } else if (inside(dsend, drecv, out)) {
        hsend = hrecv + (dsend - drecv); // e.g. AllGather: the input block inside the output
    } else if (inside(drecv, dsend, in)) {
        hrecv = hsend + (drecv - dsend);
    }
    VCCL_RETURN_IF_ERROR(stream_synchronize(op.stream));
    if (in > 0) VCCL_RETURN_IF_ERROR(copy_device_to_host(hsend, dsend, in, op.stream));
    Op host_op = op;
    host_op.mem = MemType::Host;
    host_op.coll.sendbuf = dsend != nullptr ? hsend : nullptr;
    host_op.coll.recvbuf = drecv != nullptr ? hrecv : nullptr;
    VCCL_RETURN_IF_ERROR(run_collective(comm, host_op));
    if (out > 0) VCCL_RETURN_IF_ERROR(copy_host_to_device(drecv, hrecv, out, op.stream));
    return vcclSuccess;
}

} // namespace

vcclResult_t enqueue(const Op& op) {
    if (op.stream != nullptr) {
        const char* call = op.kind == OpKind::Collective ? coll_name(op.coll.coll)
                           : op.kind == OpKind::Send     ? "send"
                                                         : "recv";
        VCCL_RETURN_IF_ERROR(stream_check_not_capturing(op.stream, call));
    }
    if (group_active()) {
        group_add(op);
        return vcclSuccess;
    }
    return run_comm_ops(op.comm, std::vector<Op>{op});
}

vcclResult_t run_comm_ops(vcclComm* comm, const std::vector<Op>& ops) {
    std::lock_guard<std::mutex> lock(comm->op_mutex);
    comm->op_count.fetch_add(1, std::memory_order_relaxed);
    if (comm->aborted.load()) {
        return set_last_error(vcclInvalidUsage, "communicator %s was aborted", comm->name.c_str());
    }
    vcclResult_t failed = vcclResult_t(comm->async_error.load());
    if (failed != vcclSuccess) {
        return set_last_error(failed, "communicator %s failed earlier: %s", comm->name.c_str(),
                              comm->async_error_text.c_str());
    }
    // Device work runs in call order whatever streams the calls use (device/staging.h, StreamOrder).
    std::vector<vcclStream_t> streams;
    for (const Op& op : ops) {
        if (op.mem == MemType::Cuda && std::find(streams.begin(), streams.end(), op.stream) == streams.end()) {
            streams.push_back(op.stream);
        }
    }
    std::vector<const Op*> p2p;
    vcclResult_t status = comm->stream_order.before(streams);
    for (const Op& op : ops) {
        if (status != vcclSuccess) break;
        if (op.kind != OpKind::Collective) {
            p2p.push_back(&op);
        } else if (device_coll_direct_possible(comm, op)) {
            status = run_device_coll_direct(comm, op);
        } else if (op.mem == MemType::Cuda) {
            status = run_collective_staged(comm, op);
        } else {
            // Host buffers with a stream: the call synchronises the stream first (documented), then runs.
            status = stream_synchronize(op.stream);
            if (status == vcclSuccess) status = run_collective(comm, op);
        }
        if (status != vcclSuccess) break;
    }
    if (status == vcclSuccess && !p2p.empty()) {
        status = run_p2p_batch(comm, p2p);
    }
    // Also after a failure: whatever was enqueued stays ordered before later calls.
    vcclResult_t ordered = comm->stream_order.after(streams);
    if (status == vcclSuccess) status = ordered;
    // Peer loss and timeouts leave the communicator unusable; argument errors do not.
    if (status == vcclRemoteError || status == vcclTimeout || status == vcclSystemError) {
        comm_set_async_error(comm, status, last_error_message());
    }
    return status;
}

} // namespace vccl
