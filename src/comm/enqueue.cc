#include "comm/enqueue.h"

#include <string>

#include "comm/group.h"
#include "core/dtype.h"
#include "core/log.h"
#include "core/status.h"
#include "device/memory.h"

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
        CollCtx ctx(comm->transport.get(), comm->rank, comm->nranks, coll_tag(seq), op.coll.dtype, op.coll.op,
                    comm->settings, &comm->aborted, &comm->scratch);
        status = algo->run(ctx, op.coll);
    }
    comm->scratch.reset();
    return status;
}

/* Posts every receive and send of the batch, then waits for all: peers may post in any order. */
vcclResult_t run_p2p(vcclComm* comm, const std::vector<const Op*>& ops) {
    Transport* transport = comm->transport.get();
    std::vector<TransportRequest*> reqs;
    reqs.reserve(ops.size());
    vcclResult_t status = vcclSuccess;
    // Receives first: an early matching send then lands directly in its buffer.
    for (int pass = 0; pass < 2 && status == vcclSuccess; ++pass) {
        for (const Op* op : ops) {
            TransportRequest* req = nullptr;
            if (pass == 0 && op->kind == OpKind::Recv) {
                status = transport->irecv(op->peer, kP2pTagBit, op->recvbuf, op->bytes, op->mem, &req);
            } else if (pass == 1 && op->kind == OpKind::Send) {
                // Synchronous: a send whose receive is never posted is detected (timeout) instead of
                // completing silently into the peer's unexpected queue.
                status = transport->isend(op->peer, kP2pTagBit, op->sendbuf, op->bytes, op->mem, true, &req);
            }
            if (status != vcclSuccess) break;
            if (req != nullptr) reqs.push_back(req);
        }
    }
    Deadline deadline = Deadline::after_ms(comm->settings.op_timeout_ms);
    size_t pending = reqs.size();
    while (status == vcclSuccess && pending > 0) {
        transport->progress();
        pending = 0;
        for (TransportRequest* req : reqs) {
            vcclResult_t r = transport->test(req);
            if (r == vcclInProgress) {
                pending++;
            } else if (r != vcclSuccess) {
                status = r;
                break;
            }
        }
        if (status != vcclSuccess || pending == 0) break;
        if (comm->aborted.load(std::memory_order_relaxed)) {
            status = set_last_error(vcclRemoteError, "communicator aborted during send/receive");
        } else if (deadline.expired()) {
            status = set_last_error(vcclTimeout,
                                    "%zu send/receive operation(s) not matched by their peers within "
                                    "VCCL_OP_TIMEOUT_MS=%lld ms (a send without a receive, or mismatched sizes?)",
                                    pending, (long long)comm->settings.op_timeout_ms);
        }
    }
    for (TransportRequest* req : reqs) transport->release(req);
    return status;
}

vcclResult_t prepare_memory(const Op& op) {
    if (op.mem == MemType::Cuda) {
        return set_last_error(vcclInvalidUsage,
                              "device buffers are not supported by this version of vccl yet; use host memory");
    }
    // Host buffers with a stream: the call synchronises the stream first (documented), then runs.
    return stream_synchronize(op.stream);
}

} // namespace

vcclResult_t enqueue(const Op& op) {
    if (group_active()) {
        group_add(op);
        return vcclSuccess;
    }
    return run_comm_ops(op.comm, std::vector<Op>{op});
}

vcclResult_t run_comm_ops(vcclComm* comm, const std::vector<Op>& ops) {
    std::lock_guard<std::mutex> lock(comm->op_mutex);
    if (comm->aborted.load()) {
        return set_last_error(vcclInvalidUsage, "communicator %s was aborted", comm->name.c_str());
    }
    vcclResult_t failed = vcclResult_t(comm->async_error.load());
    if (failed != vcclSuccess) {
        return set_last_error(failed, "communicator %s failed earlier: %s", comm->name.c_str(),
                              comm->async_error_text.c_str());
    }
    std::vector<const Op*> p2p;
    vcclResult_t status = vcclSuccess;
    for (const Op& op : ops) {
        status = prepare_memory(op);
        if (status != vcclSuccess) return status;
        if (op.kind == OpKind::Collective) {
            status = run_collective(comm, op);
            if (status != vcclSuccess) break;
        } else {
            p2p.push_back(&op);
        }
    }
    if (status == vcclSuccess && !p2p.empty()) status = run_p2p(comm, p2p);
    // Peer loss and timeouts leave the communicator unusable; argument errors do not.
    if (status == vcclRemoteError || status == vcclTimeout || status == vcclSystemError) {
        comm_set_async_error(comm, status, last_error_message());
    }
    return status;
}

} // namespace vccl
