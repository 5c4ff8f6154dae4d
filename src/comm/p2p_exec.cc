#include "comm/p2p_exec.h"

#include <cstdint>
#include <cstring>

#include "core/log.h"
#include "core/status.h"
#include "device/memory.h"
#include "device/staging.h"

namespace vccl {

namespace {

/* Waits for every request (they stay owned by the caller), honouring abort and VCCL_OP_TIMEOUT_MS. */
vcclResult_t wait_requests(vcclComm* comm, const std::vector<TransportRequest*>& reqs) {
    Transport* transport = comm->transport.get();
    Deadline deadline = Deadline::after_ms(comm->settings.op_timeout_ms);
    vcclResult_t status = vcclSuccess;
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
    return status;
}


/* Posts every receive and send of the batch, then waits for all: peers may post in any order. */
vcclResult_t run_p2p(vcclComm* comm, const std::vector<const Op*>& ops) {
    Transport* transport = comm->transport.get();
    std::vector<TransportRequest*> reqs;
    reqs.reserve(ops.size());
    vcclResult_t status = vcclSuccess;
    // A send whose buffer is also a receive buffer of the batch (in-place exchange) would race with the
    // incoming data: send from a copy taken before anything is posted.
    std::vector<const void*> send_from(ops.size());
    for (size_t i = 0; i < ops.size(); ++i) {
        const Op* op = ops[i];
        send_from[i] = op->sendbuf;
        if (op->kind != OpKind::Send || op->bytes == 0) continue;
        for (const Op* other : ops) {
            if (other->kind == OpKind::Recv && ranges_overlap(op->sendbuf, op->bytes, other->recvbuf, other->bytes)) {
                void* copy = comm->scratch.get(op->bytes);
                memcpy(copy, op->sendbuf, op->bytes);
                send_from[i] = copy;
                break;
            }
        }
    }
    // Receives first: an early matching send then lands directly in its buffer.
    for (int pass = 0; pass < 2 && status == vcclSuccess; ++pass) {
        for (size_t i = 0; i < ops.size(); ++i) {
            const Op* op = ops[i];
            TransportRequest* req = nullptr;
            if (pass == 0 && op->kind == OpKind::Recv) {
                status = transport->irecv(op->peer, kP2pTagBit, op->recvbuf, op->bytes, op->mem, &req);
            } else if (pass == 1 && op->kind == OpKind::Send) {
                // Synchronous: a send whose receive is never posted is detected (timeout) instead of
                // completing silently into the peer's unexpected queue.
                status = transport->isend(op->peer, kP2pTagBit, send_from[i], op->bytes, op->mem, true, &req);
            }
            if (status != vcclSuccess) break;
            if (req != nullptr) reqs.push_back(req);
        }
    }
    if (status == vcclSuccess) status = wait_requests(comm, reqs);
    for (TransportRequest* req : reqs) transport->release(req);
    comm->scratch.reset();
    return status;
}

/*
 * Direct device transfers with peers on this host (device/ipc_p2p.h). Both sides of every transfer with a
 * reachable peer exchange descriptors, so both choose the same path; transfers that cannot go direct are
 * returned in *rest for the host transport. Nothing here waits for device work.
 */
vcclResult_t run_p2p_direct_part(vcclComm* comm, const std::vector<const Op*>& ops, std::vector<const Op*>* rest) {
    IpcP2p* ipc = comm->ipc.get();
    if (ipc == nullptr) {
        *rest = ops;
        return vcclSuccess;
    }
    size_t n = ops.size();
    std::vector<P2pDescriptor> mine(n), theirs(n);
    std::vector<char> exchanged(n, 0), direct(n, 0);
    std::vector<TransportRequest*> reqs;
    Transport* transport = comm->transport.get();
    vcclResult_t status = vcclSuccess;
    for (size_t i = 0; i < n && status == vcclSuccess; ++i) {
        const Op* op = ops[i];
        if (op->bytes == 0 || !ipc->reachable(op->peer)) continue;
        bool is_recv = op->kind == OpKind::Recv;
        ipc->describe(is_recv ? op->recvbuf : op->sendbuf, op->bytes, is_recv, &mine[i]);
        if (is_recv) {
            // In place: READY would let the peer overwrite data this rank has not sent yet. Not offering
            // the buffer sends both sides down the staged path, which copies the outgoing data first.
            for (const Op* other : ops) {
                if (other->kind == OpKind::Send && ranges_overlap(other->sendbuf, other->bytes, op->recvbuf, op->bytes))
                    mine[i].flags &= ~kDescIpc;
            }
        }
        TransportRequest* req = nullptr;
        status = transport->irecv(op->peer, is_recv ? kP2pSendDescTag : kP2pRecvDescTag, &theirs[i],
                                  sizeof(P2pDescriptor), MemType::Host, &req);
        if (status != vcclSuccess) break;
        reqs.push_back(req);
        status = transport->isend(op->peer, is_recv ? kP2pRecvDescTag : kP2pSendDescTag, &mine[i],
                                  sizeof(P2pDescriptor), MemType::Host, false, &req);
        if (status != vcclSuccess) break;
        reqs.push_back(req);
        exchanged[i] = 1;
    }
    if (status == vcclSuccess) status = wait_requests(comm, reqs);
    for (TransportRequest* req : reqs) transport->release(req);
    VCCL_RETURN_IF_ERROR(status);

    for (size_t i = 0; i < n; ++i) {
        if (!exchanged[i]) continue;
        if (theirs[i].magic != kDescMagic || theirs[i].bytes != mine[i].bytes) {
            return set_last_error(vcclInvalidUsage, "a %s of %zu bytes with rank %d was matched by a transfer of "
                                  "%llu bytes: mismatched send/receive sizes",
                                  ops[i]->kind == OpKind::Send ? "send" : "receive", ops[i]->bytes, ops[i]->peer,
                                  (unsigned long long)theirs[i].bytes);
        }
        bool is_recv = ops[i]->kind == OpKind::Recv;
        direct[i] = IpcP2p::direct(is_recv ? theirs[i] : mine[i], is_recv ? mine[i] : theirs[i]);
    }
    // Stream order on each side: every READY of the batch first, then the sends, then the waits for DONE,
    // so two ranks exchanging on one stream each never wait on each other. From here on every peer has
    // enqueued its part: a failure gives up the transfers not enqueued yet and tells their peers
    // (IpcP2p::abandon_*), so no peer waits for ever without being told.
    std::vector<uint32_t> seq(n, 0);
    std::vector<char> ready(n, 0), sent(n, 0);
    auto give_up_rest = [&](vcclResult_t failed) {
        for (size_t j = 0; j < n; ++j) {
            if (!direct[j]) continue;
            if (ops[j]->kind == OpKind::Recv && !ready[j]) ipc->abandon_recv(ops[j]->peer);
            if (ops[j]->kind == OpKind::Send && !sent[j]) ipc->abandon_send(ops[j]->peer);
        }
        return failed;
    };
    for (size_t i = 0; i < n; ++i) {
        if (!direct[i] || ops[i]->kind != OpKind::Recv) continue;
        ready[i] = 1; // given up by post_recv_ready itself when it fails
        vcclResult_t r = ipc->post_recv_ready(ops[i]->peer, ops[i]->stream, &seq[i]);
        if (r != vcclSuccess) return give_up_rest(r);
    }
    for (size_t i = 0; i < n; ++i) {
        if (!direct[i] || ops[i]->kind != OpKind::Send) continue;
        sent[i] = 1; // likewise post_send
        vcclResult_t r = ipc->post_send(ops[i]->peer, ops[i]->sendbuf, theirs[i], ops[i]->stream);
        if (r != vcclSuccess) return give_up_rest(r);
    }
    for (size_t i = 0; i < n; ++i) {
        if (direct[i] && ops[i]->kind == OpKind::Recv)
            VCCL_RETURN_IF_ERROR(ipc->post_recv_wait(ops[i]->peer, seq[i], ops[i]->stream));
    }
    rest->clear();
    for (size_t i = 0; i < n; ++i) {
        if (!direct[i]) rest->push_back(ops[i]);
    }
    return vcclSuccess;
}

/* Sends and receives with device buffers: sends are copied out first, receives copied in at the end. */
vcclResult_t run_p2p_staged(vcclComm* comm, const std::vector<const Op*>& ops) {
    size_t total = 0;
    for (const Op* op : ops) total += op->mem == MemType::Cuda ? op->bytes : 0;
    if (total == 0) return run_p2p(comm, ops);
    void* host = nullptr;
    VCCL_RETURN_IF_ERROR(comm->staging.get(total, &host));
    std::vector<Op> staged;
    staged.reserve(ops.size());
    char* cursor = static_cast<char*>(host);
    for (const Op* op : ops) {
        Op s = *op;
        if (op->mem == MemType::Cuda) {
            VCCL_RETURN_IF_ERROR(stream_synchronize(op->stream));
            if (op->kind == OpKind::Send) {
                VCCL_RETURN_IF_ERROR(copy_device_to_host(cursor, op->sendbuf, op->bytes, op->stream));
                s.sendbuf = cursor;
            } else {
                s.recvbuf = cursor;
            }
            s.mem = MemType::Host;
            cursor += op->bytes;
        }
        staged.push_back(s);
    }
    std::vector<const Op*> ptrs;
    for (const Op& s : staged) ptrs.push_back(&s);
    VCCL_RETURN_IF_ERROR(run_p2p(comm, ptrs));
    for (size_t i = 0; i < ops.size(); ++i) {
        if (ops[i]->mem == MemType::Cuda && ops[i]->kind == OpKind::Recv) {
            VCCL_RETURN_IF_ERROR(copy_host_to_device(ops[i]->recvbuf, staged[i].recvbuf, ops[i]->bytes, ops[i]->stream));
        }
    }
    return vcclSuccess;
}

} // namespace

bool ranges_overlap(const void* a, size_t a_bytes, const void* b, size_t b_bytes) {
    auto x = reinterpret_cast<uintptr_t>(a), y = reinterpret_cast<uintptr_t>(b);
    return a_bytes > 0 && b_bytes > 0 && x < y + b_bytes && y < x + a_bytes;
}

vcclResult_t run_p2p_batch(vcclComm* comm, const std::vector<const Op*>& ops) {
    std::vector<const Op*> rest;
    VCCL_RETURN_IF_ERROR(run_p2p_direct_part(comm, ops, &rest));
    for (const Op* op : rest) {
        if (op->mem == MemType::Host) VCCL_RETURN_IF_ERROR(stream_synchronize(op->stream));
    }
    if (rest.empty()) return vcclSuccess;
    return run_p2p_staged(comm, rest);
}

} // namespace vccl
