/* SPDX-License-Identifier: BSD-3-Clause */
#include "transport/host_batch.h"

#include <cstring>

#include "core/clock.h"
#include "core/status.h"

namespace vccl {

namespace {

uint64_t piece_tag(size_t piece) { return piece == 0 ? kP2pTagBit : kP2pTagBit | kP2pPieceTagBit | uint64_t(piece); }

} // namespace

vcclResult_t host_wait_all(const HostBatchEnv& env, const std::vector<TransportRequest*>& reqs) {
    Transport* transport = env.transport;
    Deadline deadline = Deadline::after_ms(env.op_timeout_ms);
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
        if (env.aborted->load(std::memory_order_relaxed)) {
            status = set_last_error(vcclRemoteError, "communicator aborted or revoked during send/receive");
        } else if (deadline.expired()) {
            status = set_last_error(vcclTimeout,
                                    "%zu send/receive operation(s) not matched by their peers within "
                                    "VCCL_OP_TIMEOUT_MS=%lld ms (a send without a receive, or mismatched sizes?)",
                                    pending, (long long)env.op_timeout_ms);
        }
    }
    return status;
}

vcclResult_t host_batch_run(const HostBatchEnv& env, const std::vector<const Transfer*>& batch, long only_piece) {
    Transport* transport = env.transport;
    std::vector<TransportRequest*> reqs;
    reqs.reserve(batch.size());
    vcclResult_t status = vcclSuccess;
    // A send whose buffer is also a receive buffer of the batch (in-place exchange) would race with the
    // incoming data: send from a copy taken before anything is posted.
    std::vector<const void*> send_from(batch.size());
    for (size_t i = 0; i < batch.size(); ++i) {
        const Transfer* t = batch[i];
        send_from[i] = t->sendbuf;
        if (t->kind != Transfer::Send || t->bytes == 0) continue;
        for (const Transfer* other : batch) {
            if (other->kind == Transfer::Recv && ranges_overlap(t->sendbuf, t->bytes, other->recvbuf, other->bytes)) {
                void* copy = env.scratch->get(t->bytes);
                memcpy(copy, t->sendbuf, t->bytes);
                send_from[i] = copy;
                break;
            }
        }
    }
    // Receives first: an early matching send then lands directly in its buffer.
    for (int pass = 0; pass < 2 && status == vcclSuccess; ++pass) {
        for (size_t i = 0; i < batch.size() && status == vcclSuccess; ++i) {
            const Transfer* t = batch[i];
            bool recv = t->kind == Transfer::Recv;
            if ((pass == 0) != recv) continue;
            PieceCut pieces = host_batch_pieces(env, t->bytes);
            for (size_t k = 0; k < pieces.size(); ++k) {
                if (only_piece >= 0 && k != size_t(only_piece)) continue;
                ElemPiece piece = pieces[k];
                TransportRequest* req = nullptr;
                if (recv) {
                    status = transport->irecv(t->peer, piece_tag(k), static_cast<char*>(t->recvbuf) + piece.first,
                                              piece.count, t->mem, &req);
                } else {
                    // Synchronous: a send whose receive is never posted is detected (timeout) instead of
                    // completing silently into the peer's unexpected queue.
                    status = transport->isend(t->peer, piece_tag(k),
                                              static_cast<const char*>(send_from[i]) + piece.first, piece.count,
                                              t->mem, true, &req);
                }
                if (status != vcclSuccess) break;
                if (req != nullptr) reqs.push_back(req);
            }
        }
    }
    if (status == vcclSuccess) status = host_wait_all(env, reqs);
    for (TransportRequest* req : reqs) transport->release(req);
    env.scratch->reset();
    return status;
}

} // namespace vccl
