#include "comm/p2p_exec.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>

#include "comm/enqueue.h"
#include "comm/staged_pieces.h"
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


/* Messages over VCCL_STAGING_CHUNK_BYTES travel as pieces (comm/staged_pieces.h), whatever their memory, so
 * that a staged peer can move one piece while its stream copies the next (submit_p2p_staged) and still match
 * a peer that posts the whole buffer at once. Piece k > 0 has a tag of its own: sends to one peer then match
 * their receives piece by piece in call order even when one side posts piece by piece across the batch. */
PieceCut p2p_pieces(const vcclComm* comm, size_t bytes) {
    return staged_cut(bytes, 1, comm->staging_chunk_bytes);
}

uint64_t p2p_piece_tag(size_t piece) {
    return piece == 0 ? kP2pTagBit : kP2pTagBit | kP2pPieceTagBit | uint64_t(piece);
}

/* Posts every receive and send of the batch, then waits for all: peers may post in any order. `only_piece`:
 * post that piece of each operation (those with fewer pieces are left out), or every piece when negative. */
vcclResult_t run_p2p(vcclComm* comm, const std::vector<const Op*>& ops, long only_piece = -1) {
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
        for (size_t i = 0; i < ops.size() && status == vcclSuccess; ++i) {
            const Op* op = ops[i];
            bool recv = op->kind == OpKind::Recv;
            if ((pass == 0) != recv) continue;
            PieceCut pieces = p2p_pieces(comm, op->bytes);
            for (size_t k = 0; k < pieces.size(); ++k) {
                if (only_piece >= 0 && k != size_t(only_piece)) continue;
                ElemPiece piece = pieces[k];
                TransportRequest* req = nullptr;
                if (recv) {
                    status = transport->irecv(op->peer, p2p_piece_tag(k), static_cast<char*>(op->recvbuf) + piece.first,
                                              piece.count, op->mem, &req);
                } else {
                    // Synchronous: a send whose receive is never posted is detected (timeout) instead of
                    // completing silently into the peer's unexpected queue.
                    status = transport->isend(op->peer, p2p_piece_tag(k),
                                              static_cast<const char*>(send_from[i]) + piece.first, piece.count,
                                              op->mem, true, &req);
                }
                if (status != vcclSuccess) break;
                if (req != nullptr) reqs.push_back(req);
            }
        }
    }
    if (status == vcclSuccess) status = wait_requests(comm, reqs);
    for (TransportRequest* req : reqs) transport->release(req);
    comm->scratch.reset();
    return status;
}

/* Room a FIFO receive into host memory takes in the landing memory (aligned for the next one). */
size_t landing_span(size_t bytes) { return (bytes + 63) & ~size_t(63); }

/* Pinned memory for `total` bytes of FIFO receives into host memory; *out nullptr when none could be pinned
 * (the copies then go to the callers' buffers directly). The memory is allocated with the communicator's GPU
 * current. Outgrown memory is not freed here: cudaFreeHost waits for the whole GPU, and this runs under the
 * communicator's lock, so it goes with the teardown; growing at least doubles, so few are kept. */
vcclResult_t landing_memory(vcclComm* comm, size_t total, char** out) {
    *out = nullptr;
    StagingBuffer& now = comm->fifo_landing;
    if (now.bytes() > 0 && now.bytes() < total) {
        total = std::max(total, 2 * now.bytes());
        comm->fifo_landing_outgrown.emplace_back(new StagingBuffer);
        comm->fifo_landing_outgrown.back()->swap(now);
    }
    void* base = nullptr;
    VCCL_RETURN_IF_ERROR(now.get(total, &base, comm->ipc->device()));
    if (now.pinned()) *out = static_cast<char*>(base);
    return vcclSuccess;
}

/* A call that returns with landing copies posted and not all waited for (an error anywhere after them) leaves
 * copies queued into the landing memory: it is given up for good (never freed, never reused), so neither a
 * later call's data nor a free can meet them. Only after a failure, and at most the FIFO's bytes per receive. */
struct LandingInUse {
    explicit LandingInUse(vcclComm* c) : comm(c) {}
    ~LandingInUse() {
        if (!posted) return;
        StagingBuffer* abandoned = new StagingBuffer; // deliberately leaked
        abandoned->swap(comm->fifo_landing);
    }
    LandingInUse(const LandingInUse&) = delete;
    LandingInUse& operator=(const LandingInUse&) = delete;
    vcclComm* comm;
    bool posted = false;
};

/*
 * Transfers with peers on this host (device/ipc_p2p.h). The sender describes its buffer first and picks the
 * path: the receiver's staging FIFO (small, from device memory) or a rendezvous. Every receiver waits for
 * its sender's descriptor and, for a rendezvous, answers with its own; both sides then decide alike between
 * the direct copy and the host transport (returned in *rest). A FIFO sender waits for nobody, and nothing
 * here waits for device work (except receives into host memory, which complete before the call returns).
 * A size mismatch is described in *mismatch (for the caller to report once every other transfer of the
 * batch is done, so peers are not left waiting).
 */
namespace {

/* Telemetry of a device-path transfer just enqueued on `stream` (comm/device_flows.h): its note, when it is timed,
 * rides with the stream's next memory operation. */
void flow_posted(vcclComm* comm, int peer, telemetry::Dir dir, uint64_t bytes, void* stream) {
    if (!comm->device_flows) return;
    int word = -1;
    const uint32_t note = comm->device_flows->posted(peer, dir, bytes, &word);
    if (note != 0) comm->ipc->note(word, note, stream);
}

} // namespace

vcclResult_t run_p2p_direct_part(vcclComm* comm, const std::vector<const Op*>& ops, std::vector<const Op*>* rest,
                                 std::string* mismatch) {
    IpcP2p* ipc = comm->ipc.get();
    if (ipc == nullptr) {
        *rest = ops;
        return vcclSuccess;
    }
    // Flag writes left pending by the ipc calls below are enqueued on every way out.
    struct FlushAtExit {
        IpcP2p* ipc;
        ~FlushAtExit() { (void)ipc->flush(); }
    } flush_at_exit{ipc};
    enum class Path : char { Host, Direct, Fifo, FifoDrop, Skip };
    size_t n = ops.size();
    std::vector<P2pDescriptor> mine(n), theirs(n);
    std::vector<char> exchanged(n, 0);
    std::vector<Path> path(n, Path::Host);
    std::vector<TransportRequest*> announced, answered;
    Transport* transport = comm->transport.get();
    vcclResult_t status = vcclSuccess;
    auto release_requests = [&] {
        for (TransportRequest* req : announced) transport->release(req);
        for (TransportRequest* req : answered) transport->release(req);
    };
    auto sender_fifo = [](const P2pDescriptor& d) { return d.magic == kDescMagic && (d.flags & kDescFifo) != 0; };
    // Announce: senders send their descriptors; receivers post for them; rendezvous senders post for the answer.
    for (size_t i = 0; i < n && status == vcclSuccess; ++i) {
        const Op* op = ops[i];
        if (op->bytes == 0 || !ipc->reachable(op->peer)) continue;
        TransportRequest* req = nullptr;
        if (op->kind == OpKind::Recv) {
            status = transport->irecv(op->peer, kP2pSendDescTag, &theirs[i], sizeof(P2pDescriptor), MemType::Host, &req);
            if (status == vcclSuccess) announced.push_back(req);
        } else {
            ipc->describe(op->peer, op->sendbuf, op->bytes, false, comm->registrations.find(op->sendbuf, op->bytes), &mine[i]);
            if ((mine[i].flags & kDescDevice) && op->bytes <= ipc->fifo_bytes(op->peer)) mine[i].flags |= kDescFifo;
            status = transport->isend(op->peer, kP2pSendDescTag, &mine[i], sizeof(P2pDescriptor), MemType::Host, false,
                                      &req);
            if (status == vcclSuccess) announced.push_back(req);
            if (status == vcclSuccess && !(mine[i].flags & kDescFifo)) {
                status = transport->irecv(op->peer, kP2pRecvDescTag, &theirs[i], sizeof(P2pDescriptor), MemType::Host,
                                          &req);
                if (status == vcclSuccess) answered.push_back(req);
            }
        }
        exchanged[i] = status == vcclSuccess;
    }
    if (status == vcclSuccess) status = wait_requests(comm, announced);
    const bool descriptors_in = status == vcclSuccess; // every peer's descriptor has arrived
    // Answer: receivers of rendezvous transfers describe their buffers (mismatched ones too, so the sender
    // learns of the mismatch instead of waiting).
    for (size_t i = 0; i < n && status == vcclSuccess; ++i) {
        const Op* op = ops[i];
        if (!exchanged[i] || op->kind != OpKind::Recv || sender_fifo(theirs[i])) continue;
        // In place needs no care here: run_p2p_batch gave device sends that overlap a device receive a copy.
        // Exported only for a sender whose buffer allows a direct transfer: a VMM export sends the peer a
        // file descriptor it would otherwise never take.
        int exporting_to = theirs[i].magic == kDescMagic && (theirs[i].flags & kDescDevice) ? op->peer : -1;
        ipc->describe(exporting_to, op->recvbuf, op->bytes, true, comm->registrations.find(op->recvbuf, op->bytes),
                      &mine[i]);
        TransportRequest* req = nullptr;
        status = transport->isend(op->peer, kP2pRecvDescTag, &mine[i], sizeof(P2pDescriptor), MemType::Host, false, &req);
        if (status == vcclSuccess) answered.push_back(req);
    }
    if (status == vcclSuccess) status = wait_requests(comm, answered);
    if (status == vcclSuccess && comm->test_fail_next_exchange) {
        comm->test_fail_next_exchange = false;
        status = set_last_error(vcclTimeout, "send/recv descriptor exchange given up (test hook)");
    }
    release_requests();
    if (status != vcclSuccess) {
        // This rank gives the batch up during the exchange (a timeout, a failed path), and its peers are told as
        // after a failure past the exchange (give_up_rest below); before, they waited until this rank aborted.
        // A receiver that has this rank's descriptor may have enqueued its part (READY and the wait for DONE, or
        // the wait for a FIFO slot): its stream goes on (the data is not valid) and vcclCommGetAsyncError reports
        // vcclRemoteError there. A sender that has this rank's answer, or that sends through the FIFO, may have
        // enqueued its transfer: it is told (its stream waits for a READY or a slot until this rank aborts, as a
        // copy into a buffer whose call failed must not happen).
        for (size_t i = 0; i < n; ++i) {
            if (!exchanged[i]) continue;
            const Op* op = ops[i];
            if (op->kind == OpKind::Send) {
                if (mine[i].flags & kDescFifo) {
                    ipc->abandon_fifo_send(op->peer, op->stream);
                } else if (mine[i].flags & kDescDevice) {
                    ipc->abandon_send(op->peer, op->stream);
                }
            } else if (descriptors_in && sender_fifo(theirs[i])) {
                ipc->abandon_fifo_recv(op->peer);
            } else if (descriptors_in && theirs[i].magic == kDescMagic && (theirs[i].flags & kDescDevice)) {
                ipc->abandon_recv(op->peer);
            }
        }
        return status;
    }

    mismatch->clear();
    for (size_t i = 0; i < n; ++i) {
        if (!exchanged[i]) continue;
        const Op* op = ops[i];
        bool is_recv = op->kind == OpKind::Recv;
        bool fifo = is_recv ? sender_fifo(theirs[i]) : (mine[i].flags & kDescFifo) != 0;
        if (fifo && !is_recv) { // the receiver checks the size
            path[i] = Path::Fifo;
            continue;
        }
        if (theirs[i].magic != kDescMagic || theirs[i].bytes != op->bytes) {
            if (mismatch->empty()) {
                char text[256];
                snprintf(text, sizeof(text), "a %s of %zu bytes with rank %d was matched by a transfer of %llu bytes: "
                         "mismatched send/receive sizes", is_recv ? "receive" : "send", op->bytes, op->peer,
                         (unsigned long long)theirs[i].bytes);
                *mismatch = text;
            }
            // Both sides skip a rendezvous; a FIFO transfer was sent, so its slot is consumed and dropped,
            // and the sender, which does not check, is told.
            path[i] = fifo ? Path::FifoDrop : Path::Skip;
            if (fifo) ipc->report_failure(op->peer);
            continue;
        }
        if (fifo) {
            path[i] = Path::Fifo;
        } else {
            path[i] = IpcP2p::direct(is_recv ? theirs[i] : mine[i], is_recv ? mine[i] : theirs[i]) ? Path::Direct
                                                                                                   : Path::Host;
        }
    }
    // Stream order on each side: every READY first; then the FIFO transfers in rounds (round k: the k-th
    // FIFO send to each peer, then the k-th FIFO receive from each peer); then the direct sends; then the
    // waits for DONE. A wait only ever depends on a peer's earlier part or earlier round, so ranks
    // exchanging on one stream each never wait on each other, however many FIFO transfers a batch holds
    // (a FIFO send of round k waits for the credit freed by the peer's receive of round k - slots). From
    // here on every peer has enqueued its part or will: a failure gives up the transfers not enqueued yet
    // and tells their peers (IpcP2p::abandon_*), so no peer waits for ever without being told.
    std::vector<uint32_t> seq(n, 0);
    std::vector<char> posted(n, 0);
    auto give_up_rest = [&](vcclResult_t failed) {
        for (size_t j = 0; j < n; ++j) {
            if (posted[j]) continue;
            bool send = ops[j]->kind == OpKind::Send;
            if (path[j] == Path::Direct) {
                send ? ipc->abandon_send(ops[j]->peer, ops[j]->stream) : ipc->abandon_recv(ops[j]->peer);
            }
            if (path[j] == Path::Fifo || path[j] == Path::FifoDrop) {
                send ? ipc->abandon_fifo_send(ops[j]->peer, ops[j]->stream) : ipc->abandon_fifo_recv(ops[j]->peer);
            }
        }
        return failed;
    };
    // Receives into host memory through the FIFO land in pinned memory of the communicator's first, and reach
    // the caller's buffer only once their stream is waited for (the end of this function). A wait that ends
    // with an error (a failed peer, an abort) leaves the copy queued: it must not land in a buffer whose call
    // failed (and which may be freed by then). Pinned also keeps cudaMemcpyAsync from waiting for the stream
    // itself, as it does into pageable memory, where a blocked stream would hold this call beyond the reach of
    // abort. Only without pinned memory does the copy go to the caller's buffer directly (as before).
    std::vector<void*> landing(n, nullptr);
    LandingInUse landing_in_use(comm);
    {
        size_t total = 0;
        for (size_t i = 0; i < n; ++i) {
            if (path[i] == Path::Fifo && ops[i]->kind == OpKind::Recv && ops[i]->mem == MemType::Host)
                total += landing_span(ops[i]->bytes);
        }
        char* cursor = nullptr;
        vcclResult_t r = total > 0 ? landing_memory(comm, total, &cursor) : vcclSuccess;
        if (r != vcclSuccess) return give_up_rest(r);
        for (size_t i = 0; i < n; ++i) {
            if (path[i] != Path::Fifo || ops[i]->kind != OpKind::Recv) continue;
            landing[i] = ops[i]->recvbuf;
            if (cursor == nullptr || ops[i]->mem != MemType::Host) continue;
            landing[i] = cursor;
            cursor += landing_span(ops[i]->bytes);
        }
    }
    for (size_t i = 0; i < n; ++i) {
        if (path[i] != Path::Direct || ops[i]->kind != OpKind::Recv) continue;
        posted[i] = 1; // given up by post_recv_ready itself when it fails
        vcclResult_t r = ipc->post_recv_ready(ops[i]->peer, ops[i]->stream, &seq[i]);
        if (r != vcclSuccess) return give_up_rest(r);
    }
    // FIFO rounds: each transfer's index among the FIFO transfers of its kind with its peer.
    std::vector<size_t> round(n, 0);
    size_t rounds = 0;
    {
        std::vector<std::pair<int, OpKind>> keys;
        std::vector<size_t> counts;
        for (size_t i = 0; i < n; ++i) {
            if (path[i] != Path::Fifo && path[i] != Path::FifoDrop) continue;
            std::pair<int, OpKind> key(ops[i]->peer, ops[i]->kind);
            size_t k = 0;
            while (k < keys.size() && keys[k] != key) ++k;
            if (k == keys.size()) {
                keys.push_back(key);
                counts.push_back(0);
            }
            round[i] = counts[k]++;
            rounds = std::max(rounds, counts[k]);
        }
    }
    for (size_t r = 0; r < rounds; ++r) {
        for (OpKind kind : {OpKind::Send, OpKind::Recv}) {
            for (size_t i = 0; i < n; ++i) {
                if ((path[i] != Path::Fifo && path[i] != Path::FifoDrop) || round[i] != r || ops[i]->kind != kind) continue;
                const Op* op = ops[i];
                posted[i] = 1; // post_fifo_* give up by themselves when they fail
                if (kind == OpKind::Recv && path[i] == Path::Fifo && landing[i] != op->recvbuf) landing_in_use.posted = true;
                vcclResult_t res =
                    kind == OpKind::Send ? ipc->post_fifo_send(op->peer, op->sendbuf, op->bytes, op->stream)
                                         : ipc->post_fifo_recv(op->peer, path[i] == Path::Fifo ? landing[i] : nullptr,
                                                               op->bytes, op->mem == MemType::Host, op->stream);
                if (res != vcclSuccess) return give_up_rest(res);
                if (path[i] == Path::Fifo && kind == OpKind::Recv && op->mem == MemType::Host) {
                    if (comm->device_flows) comm->device_flows->counted(op->peer, telemetry::Dir::Recv, op->bytes);
                } else if (path[i] == Path::Fifo) {
                    // FULL and FREE go out at once: a note is a driver call of its own (sampled transfers only).
                    flow_posted(comm, op->peer, kind == OpKind::Send ? telemetry::Dir::Send : telemetry::Dir::Recv,
                                op->bytes, op->stream);
                }
            }
        }
    }
    for (size_t i = 0; i < n; ++i) {
        if (path[i] != Path::Direct || ops[i]->kind != OpKind::Send) continue;
        posted[i] = 1; // likewise post_send
        vcclResult_t r = ipc->post_send(ops[i]->peer, ops[i]->sendbuf, theirs[i], ops[i]->stream, !ops[i]->peer_buffer_free);
        if (r != vcclSuccess) return give_up_rest(r);
        flow_posted(comm, ops[i]->peer, telemetry::Dir::Send, ops[i]->bytes, ops[i]->stream); // with its DONE
    }
    for (size_t i = 0; i < n; ++i) {
        if (path[i] != Path::Direct || ops[i]->kind != OpKind::Recv) continue;
        // A timed receive's note goes in the same driver call as its DONE wait.
        int word = -1;
        uint32_t note = 0;
        if (comm->device_flows) note = comm->device_flows->posted(ops[i]->peer, telemetry::Dir::Recv, ops[i]->bytes, &word);
        vcclResult_t r = ipc->post_recv_wait(ops[i]->peer, seq[i], ops[i]->stream, note != 0 ? word : -1, note);
        if (r != vcclSuccess) {
            if (note != 0) comm->device_flows->abandoned(word, note);
            return r;
        }
    }
    VCCL_RETURN_IF_ERROR(ipc->flush()); // before the host waits below, and before the caller enqueues more
    // Receives into host memory complete before the call returns, as on the host transport.
    for (size_t i = 0; i < n; ++i) {
        if (path[i] != Path::Fifo || ops[i]->kind != OpKind::Recv || ops[i]->mem != MemType::Host) continue;
        VCCL_RETURN_IF_ERROR(comm_stream_wait(comm, ops[i]->stream));
        if (landing[i] != ops[i]->recvbuf && ops[i]->bytes > 0) memcpy(ops[i]->recvbuf, landing[i], ops[i]->bytes);
    }
    landing_in_use.posted = false; // every landing copy has run
    rest->clear();
    for (size_t i = 0; i < n; ++i) {
        if (path[i] == Path::Host) rest->push_back(ops[i]);
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
            VCCL_RETURN_IF_ERROR(comm_stream_wait(comm, op->stream));
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

vcclResult_t submit_p2p_staged(vcclComm* comm, StagedQueue* queue, const std::vector<const Op*>& ops) {
    // One job on the last operation's stream: the batch's other streams hand over to it first and wait for
    // it after, so each stream's later work sees its receives.
    vcclStream_t stream = ops.back()->stream;
    std::vector<vcclStream_t> others;
    for (const Op* op : ops) {
        if (op->stream != stream && std::find(others.begin(), others.end(), op->stream) == others.end())
            others.push_back(op->stream);
    }
    for (vcclStream_t s : others) VCCL_RETURN_IF_ERROR(stream_wait_for(stream, s));
    // Part k moves piece k of every operation that has one (p2p_pieces): the stream copies piece k + 1 in
    // while the proxy moves piece k.
    StagedQueue::Job job;
    job.stream = stream;
    std::vector<Op> host_ops;
    std::vector<size_t> offsets;
    for (const Op* op : ops) {
        offsets.push_back(job.host_bytes);
        PieceCut pieces = p2p_pieces(comm, op->bytes);
        if (job.parts.size() < pieces.size()) job.parts.resize(pieces.size());
        char* device = static_cast<char*>(op->kind == OpKind::Send ? const_cast<void*>(op->sendbuf) : op->recvbuf);
        for (size_t k = 0; k < pieces.size(); ++k) {
            // Sends are copied out before any receive is copied in (all inputs go first, StagedQueue::Job), so
            // an in-place exchange sends the old data.
            ElemPiece piece = pieces[k];
            StagedQueue::Copy c{device + piece.first, job.host_bytes + piece.first, piece.count};
            (op->kind == OpKind::Send ? job.parts[k].in : job.parts[k].out).push_back(c);
        }
        job.host_bytes += op->bytes;
        host_ops.push_back(*op);
        host_ops.back().mem = MemType::Host;
    }
    for (size_t k = 0; k < job.parts.size(); ++k) {
        job.parts[k].work = [comm, host_ops, offsets, k](char* host) mutable {
            std::vector<const Op*> ptrs;
            for (size_t i = 0; i < host_ops.size(); ++i) {
                Op& h = host_ops[i];
                if (h.kind == OpKind::Send) {
                    h.sendbuf = host + offsets[i];
                } else {
                    h.recvbuf = host + offsets[i];
                }
                ptrs.push_back(&h);
            }
            return run_p2p(comm, ptrs, long(k));
        };
    }
    vcclResult_t status = queue->submit(std::move(job));
    for (vcclStream_t s : others) {
        vcclResult_t r = stream_wait_for(s, stream);
        if (status == vcclSuccess) status = r;
    }
    return status;
}

bool ranges_overlap(const void* a, size_t a_bytes, const void* b, size_t b_bytes) {
    auto x = reinterpret_cast<uintptr_t>(a), y = reinterpret_cast<uintptr_t>(b);
    return a_bytes > 0 && b_bytes > 0 && x < y + b_bytes && y < x + a_bytes;
}

namespace {

/* Device sends whose buffer a device receive of the same batch writes (in-place exchange) send from a copy
 * taken before anything of the batch is enqueued, in the communicator's in-place scratch (kept between calls:
 * with a stream-ordered allocation per call an in-place send/recv of 8 B-32 KiB took 26-32 us on 2x H200, with
 * the kept scratch 23-25, run180; out of place 11-18: the copy must end before this rank's READY); the receive's
 * stream waits for the copy. Calls reuse the scratch safely because the
 * communicator's device work runs in call order (comm->stream_order), and each batch's sends read it before
 * anything later is enqueued. The copies of one batch sit side by side. */
vcclResult_t take_in_place_copies(vcclComm* comm, const std::vector<const Op*>& ops, std::vector<Op>* storage,
                                  std::vector<const Op*>* out) {
    *out = ops;
    auto overlapping_recv = [&](const Op* send, const Op* other) {
        return other->kind == OpKind::Recv && other->mem == MemType::Cuda &&
               ranges_overlap(send->sendbuf, send->bytes, other->recvbuf, other->bytes);
    };
    auto needs_copy = [&](const Op* op) {
        if (op->kind != OpKind::Send || op->mem != MemType::Cuda || op->bytes == 0) return false;
        for (const Op* other : ops) {
            if (overlapping_recv(op, other)) return true;
        }
        return false;
    };
    size_t total = 0;
    for (const Op* op : ops) {
        if (needs_copy(op)) total += DeviceScratch::slot_bytes(op->bytes);
    }
    if (total == 0) return vcclSuccess;
    void* base = nullptr;
    VCCL_RETURN_IF_ERROR(comm->in_place_scratch.get(total, nullptr, &base));
    storage->reserve(ops.size());
    size_t at = 0;
    for (size_t i = 0; i < ops.size(); ++i) {
        const Op* op = ops[i];
        if (!needs_copy(op)) continue;
        void* copy = static_cast<char*>(base) + at;
        at += DeviceScratch::slot_bytes(op->bytes);
        VCCL_RETURN_IF_ERROR(copy_device_to_device(copy, op->sendbuf, op->bytes, op->stream));
        storage->push_back(*op);
        storage->back().sendbuf = copy;
        (*out)[i] = &storage->back();
        for (const Op* other : ops) {
            if (overlapping_recv(op, other)) VCCL_RETURN_IF_ERROR(stream_wait_for(other->stream, op->stream));
        }
    }
    return vcclSuccess;
}

} // namespace

vcclResult_t run_p2p_batch(vcclComm* comm, const std::vector<const Op*>& ops) {
    std::vector<Op> storage;
    std::vector<const Op*> batch;
    VCCL_RETURN_IF_ERROR(take_in_place_copies(comm, ops, &storage, &batch));
    std::vector<const Op*> rest;
    std::string mismatch;
    VCCL_RETURN_IF_ERROR(run_p2p_direct_part(comm, batch, &rest, &mismatch));
    for (const Op* op : rest) {
        if (op->mem == MemType::Host) VCCL_RETURN_IF_ERROR(comm_stream_wait(comm, op->stream));
    }
    vcclResult_t status = rest.empty() ? vcclSuccess : run_p2p_staged(comm, rest);
    if (mismatch.empty()) return status;
    return set_last_error(vcclInvalidUsage, "%s", mismatch.c_str());
}

} // namespace vccl
