/* SPDX-License-Identifier: BSD-3-Clause */
#include "transport/cuda_ipc/direct_path.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <utility>

#include "core/status.h"
#include "core/test_point.h"
#include "device/memory.h"

namespace vccl {

namespace {

enum class Path : char { Host, Direct, Fifo, FifoDrop, Skip, Graph };

constexpr uint32_t kNoGraphSlot = ~0u; // a captured transfer beyond the pair's graph slots

bool graph_desc(const P2pDescriptor& d) { return d.magic == kDescMagic && (d.flags & kDescGraph) != 0; }

/* Room a FIFO receive into host memory takes in the landing memory (aligned for the next one). */
size_t landing_span(size_t bytes) { return (bytes + 63) & ~size_t(63); }

bool sender_fifo(const P2pDescriptor& d) { return d.magic == kDescMagic && (d.flags & kDescFifo) != 0; }

/* Telemetry of a device-path transfer just enqueued on `stream` (telemetry/device_flows.h): its note, when it is
 * timed, rides with the stream's next memory operation. */
void flow_posted(DeviceFlows* flows, IpcP2p* ipc, int peer, telemetry::Dir dir, uint64_t bytes, void* stream) {
    if (flows == nullptr) return;
    int word = -1;
    const uint32_t note = flows->posted(peer, dir, bytes, &word);
    if (note != 0) ipc->note(word, note, stream);
}

} // namespace

/* One batch on its way through the path: each transfer's descriptors and the path it takes. */
struct DirectPath::Batch {
    explicit Batch(const std::vector<const Transfer*>& t)
        : ops(t), n(t.size()), mine(n), theirs(n), exchanged(n, 0), path(n, Path::Host), seq(n, 0), posted(n, 0),
          landing(n, nullptr), graph_slot(n, kNoGraphSlot) {}
    const std::vector<const Transfer*>& ops;
    size_t n;
    std::vector<P2pDescriptor> mine, theirs;
    std::vector<char> exchanged;
    std::vector<Path> path;
    std::vector<uint32_t> seq;    // rendezvous receives: the READY they published
    std::vector<char> posted;     // enqueued, or given up by the post itself
    std::vector<void*> landing;   // FIFO receives: where the slot is copied to
    bool landing_in_use = false;  // FIFO receives into landing memory are queued and not yet waited for
    std::vector<uint32_t> graph_slot; // captured transfers: this side's graph slot (kNoGraphSlot: none left)
};

vcclResult_t DirectPath::post(const std::vector<const Transfer*>& batch, std::vector<const Transfer*>* rest,
                              std::string* mismatch) {
    mismatch->clear();
    IpcP2p* ipc = env.ipc;
    if (ipc == nullptr) {
        *rest = batch;
        return vcclSuccess;
    }
    // Flag writes left pending by the ipc calls below are enqueued on every way out.
    struct FlushAtExit {
        IpcP2p* ipc;
        ~FlushAtExit() { (void)ipc->flush(); }
    } flush_at_exit{ipc};
    Batch b(batch);
    VCCL_RETURN_IF_ERROR(exchange(b));
    choose(b, mismatch);
    vcclResult_t r = enqueue(b);
    // A captured batch that failed lets go of what its sends held (its capture is not usable), and its peers are told:
    // their captures of the other sides may have succeeded, and a replay of those would wait for this rank for ever.
    if (r != vcclSuccess && std::find(b.path.begin(), b.path.end(), Path::Graph) != b.path.end()) {
        (void)ipc->graph_keep();
        for (size_t i = 0; i < b.n; ++i) {
            if (b.path[i] == Path::Graph) ipc->report_failure(batch[i]->peer);
        }
    }
    if (b.landing_in_use) {
        // A call that returns with landing copies posted and not all waited for (an error anywhere after them)
        // leaves copies queued into the landing memory: it is given up for good (never freed, never reused), so
        // neither a later call's data nor a free can meet them. Only after a failure, and at most the FIFO's bytes
        // per receive.
        StagingBuffer* abandoned = new StagingBuffer; // deliberately leaked
        abandoned->swap(landing_);
    }
    VCCL_RETURN_IF_ERROR(r);
    rest->clear();
    for (size_t i = 0; i < b.n; ++i) {
        if (b.path[i] == Path::Host) rest->push_back(batch[i]);
    }
    return vcclSuccess;
}

/* Announce: senders send their descriptors; receivers post for them; rendezvous senders post for the answer. Then
 * the receivers of rendezvous transfers answer with their own (mismatched ones too, so the sender learns of the
 * mismatch instead of waiting). */
vcclResult_t DirectPath::exchange(Batch& b) {
    IpcP2p* ipc = env.ipc;
    Transport* transport = env.host.transport;
    std::vector<TransportRequest*> announced, answered;
    vcclResult_t status = vcclSuccess;
    for (size_t i = 0; i < b.n && status == vcclSuccess; ++i) {
        const Transfer* t = b.ops[i];
        if (t->bytes == 0 || !ipc->reachable(t->peer)) continue;
        // Numbered in capture order on both sides, whatever happens next, so that pairs stay in step.
        if (t->captured && !ipc->graph_slots(t->peer, t->kind == Transfer::Send, 1, &b.graph_slot[i])) {
            b.graph_slot[i] = kNoGraphSlot;
        }
        TransportRequest* req = nullptr;
        if (t->kind == Transfer::Recv) {
            status = transport->irecv(t->peer, kP2pSendDescTag, &b.theirs[i], sizeof(P2pDescriptor), MemType::Host, &req);
            if (status == vcclSuccess) announced.push_back(req);
        } else {
            ipc->describe(t->peer, t->sendbuf, t->bytes, false, env.registrations->find(t->sendbuf, t->bytes),
                          &b.mine[i]);
            if (t->captured) {
                b.mine[i].flags |= kDescGraph; // always a rendezvous
                b.mine[i].graph_slot = b.graph_slot[i];
            } else if ((b.mine[i].flags & kDescDevice) && t->bytes <= ipc->fifo_bytes(t->peer)) {
                b.mine[i].flags |= kDescFifo;
            }
            status = transport->isend(t->peer, kP2pSendDescTag, &b.mine[i], sizeof(P2pDescriptor), MemType::Host,
                                      false, &req);
            if (status == vcclSuccess) announced.push_back(req);
            if (status == vcclSuccess && !(b.mine[i].flags & kDescFifo)) {
                status = transport->irecv(t->peer, kP2pRecvDescTag, &b.theirs[i], sizeof(P2pDescriptor),
                                          MemType::Host, &req);
                if (status == vcclSuccess) answered.push_back(req);
            }
        }
        b.exchanged[i] = status == vcclSuccess;
    }
    if (status == vcclSuccess) status = host_wait_all(env.host, announced);
    const bool descriptors_in = status == vcclSuccess; // every peer's descriptor has arrived
    for (size_t i = 0; i < b.n && status == vcclSuccess; ++i) {
        const Transfer* t = b.ops[i];
        if (!b.exchanged[i] || t->kind != Transfer::Recv || sender_fifo(b.theirs[i])) continue;
        // In place needs no care here: the executor gave device sends that overlap a device receive a copy.
        // Exported only for a sender whose buffer allows a direct transfer: a VMM export sends the peer a
        // file descriptor it would otherwise never take.
        int exporting_to = b.theirs[i].magic == kDescMagic && (b.theirs[i].flags & kDescDevice) ? t->peer : -1;
        ipc->describe(exporting_to, t->recvbuf, t->bytes, true, env.registrations->find(t->recvbuf, t->bytes),
                      &b.mine[i]);
        if (t->captured) {
            b.mine[i].flags |= kDescGraph;
            b.mine[i].graph_slot = b.graph_slot[i];
        }
        TransportRequest* req = nullptr;
        status = transport->isend(t->peer, kP2pRecvDescTag, &b.mine[i], sizeof(P2pDescriptor), MemType::Host, false,
                                  &req);
        if (status == vcclSuccess) answered.push_back(req);
    }
    if (status == vcclSuccess) status = host_wait_all(env.host, answered);
    if (status == vcclSuccess && test_point(env.test_key, TestPoint::FailExchange)) {
        status = set_last_error(vcclTimeout, "send/recv descriptor exchange given up (test point)");
    }
    for (TransportRequest* req : announced) transport->release(req);
    for (TransportRequest* req : answered) transport->release(req);
    if (status == vcclSuccess) return vcclSuccess;
    // This rank gives the batch up during the exchange (a timeout, a failed path), and its peers are told as
    // after a failure past the exchange (enqueue's give_up_rest). A receiver that has this rank's descriptor may
    // have enqueued its part (READY and the wait for DONE, or the wait for a FIFO slot): its stream goes on (the
    // data is not valid) and vcclCommGetAsyncError reports vcclRemoteError there. A sender that has this rank's
    // answer, or that sends through the FIFO, may have enqueued its transfer: it is told (its stream waits for a
    // READY or a slot until this rank aborts, as a copy into a buffer whose call failed must not happen).
    for (size_t i = 0; i < b.n; ++i) {
        if (!b.exchanged[i]) continue;
        const Transfer* t = b.ops[i];
        if (t->captured) { // nothing enqueued, no eager sequence number taken: the peer is told
            ipc->report_failure(t->peer);
            continue;
        }
        if (t->kind == Transfer::Send) {
            if (b.mine[i].flags & kDescFifo) {
                ipc->abandon_fifo_send(t->peer, t->stream);
            } else if (b.mine[i].flags & kDescDevice) {
                ipc->abandon_send(t->peer, t->stream);
            }
        } else if (descriptors_in && sender_fifo(b.theirs[i])) {
            ipc->abandon_fifo_recv(t->peer);
        } else if (descriptors_in && b.theirs[i].magic == kDescMagic && (b.theirs[i].flags & kDescDevice)) {
            ipc->abandon_recv(t->peer);
        }
    }
    return status;
}

/* Both sides decide alike from the two descriptors. A size mismatch is described in *mismatch. */
void DirectPath::choose(Batch& b, std::string* mismatch) {
    for (size_t i = 0; i < b.n; ++i) {
        if (!b.exchanged[i]) continue;
        const Transfer* t = b.ops[i];
        bool is_recv = t->kind == Transfer::Recv;
        bool fifo = is_recv ? sender_fifo(b.theirs[i]) : (b.mine[i].flags & kDescFifo) != 0;
        if (t->captured || graph_desc(b.theirs[i])) {
            choose_graph(b, i, mismatch);
            continue;
        }
        if (fifo && !is_recv) { // the receiver checks the size
            b.path[i] = Path::Fifo;
            continue;
        }
        if (b.theirs[i].magic != kDescMagic || b.theirs[i].bytes != t->bytes) {
            if (mismatch->empty()) {
                char text[256];
                snprintf(text, sizeof(text), "a %s of %zu bytes with rank %d was matched by a transfer of %llu bytes: "
                         "mismatched send/receive sizes", is_recv ? "receive" : "send", t->bytes, t->peer,
                         (unsigned long long)b.theirs[i].bytes);
                *mismatch = text;
            }
            // Both sides skip a rendezvous; a FIFO transfer was sent, so its slot is consumed and dropped,
            // and the sender, which does not check, is told.
            b.path[i] = fifo ? Path::FifoDrop : Path::Skip;
            if (fifo) env.ipc->report_failure(t->peer);
            continue;
        }
        if (fifo) {
            b.path[i] = Path::Fifo;
        } else {
            b.path[i] = IpcP2p::direct(is_recv ? b.theirs[i] : b.mine[i], is_recv ? b.mine[i] : b.theirs[i])
                            ? Path::Direct
                            : Path::Host;
        }
    }
}

/* A transfer of which one side (or both) is being captured into a CUDA graph: both captured, in step, the same
 * size and the direct path (no VMM receive buffer: its views are retired after each batch), else an error on both
 * sides. An eager FIFO sender matched by a captured receiver has sent already: it is told, and its FIFO is out of
 * step with this rank from now on (the communicator is not usable afterwards; the error says so). */
void DirectPath::choose_graph(Batch& b, size_t i, std::string* mismatch) {
    const Transfer* t = b.ops[i];
    const bool is_recv = t->kind == Transfer::Recv;
    const P2pDescriptor& send = is_recv ? b.theirs[i] : b.mine[i];
    const P2pDescriptor& recv = is_recv ? b.mine[i] : b.theirs[i];
    const char* kind = is_recv ? "receive" : "send";
    char text[320] = "";
    if (!t->captured || !graph_desc(b.theirs[i])) {
        snprintf(text, sizeof(text), "a %s %s rank %d %s captured into a CUDA graph and its match there %s: capture "
                 "both sides or neither%s", kind, is_recv ? "from" : "to", t->peer, t->captured ? "is" : "is not",
                 t->captured ? "is not" : "is",
                 is_recv && sender_fifo(b.theirs[i]) ? " (the staging FIFO with that rank is out of step now)" : "");
        if (is_recv && sender_fifo(b.theirs[i])) env.ipc->report_failure(t->peer);
    } else if (b.theirs[i].bytes != t->bytes) {
        snprintf(text, sizeof(text), "a captured %s of %zu bytes with rank %d was matched by a transfer of %llu bytes: "
                 "mismatched send/receive sizes", kind, t->bytes, t->peer, (unsigned long long)b.theirs[i].bytes);
    } else if (send.graph_slot == kNoGraphSlot || recv.graph_slot == kNoGraphSlot) {
        snprintf(text, sizeof(text), "more than %u %ss %s rank %d were captured into CUDA graphs over this "
                 "communicator's life: make a new communicator for further captures", IpcP2p::kGraphSlots, kind,
                 is_recv ? "from" : "to", t->peer);
    } else if (send.graph_slot != recv.graph_slot) {
        snprintf(text, sizeof(text), "captured send/recv with rank %d out of step (this side's captured %s number %u "
                 "met that rank's %u): capture the same transfers in the same order on every rank", t->peer, kind,
                 b.graph_slot[i], b.theirs[i].graph_slot);
    } else if (!IpcP2p::direct(send, recv) || (recv.flags & kDescVmm) != 0) {
        snprintf(text, sizeof(text), "a %s %s rank %d cannot be captured into a CUDA graph: captured send/recv needs "
                 "device buffers allocated with cudaMalloc (or the caching allocators built on it) on both sides",
                 kind, is_recv ? "from" : "to", t->peer);
    }
    if (text[0] == '\0') {
        b.path[i] = Path::Graph;
        return;
    }
    if (mismatch->empty()) *mismatch = text;
    b.path[i] = Path::Skip;
}

/* Pinned memory for `total` bytes of FIFO receives into host memory; *out nullptr when none could be pinned
 * (the copies then go to the callers' buffers directly). The memory is allocated with the communicator's GPU
 * current. Outgrown memory is not freed here: cudaFreeHost waits for the whole GPU, and this runs under the
 * communicator's lock, so it goes with the teardown; growing at least doubles, so few are kept. */
vcclResult_t DirectPath::landing_memory(size_t total, char** out) {
    *out = nullptr;
    StagingBuffer& now = landing_;
    if (now.bytes() > 0 && now.bytes() < total) {
        total = std::max(total, 2 * now.bytes());
        landing_outgrown_.emplace_back(new StagingBuffer);
        landing_outgrown_.back()->swap(now);
    }
    void* base = nullptr;
    VCCL_RETURN_IF_ERROR(now.get(total, &base, env.ipc->device()));
    if (now.pinned()) *out = static_cast<char*>(base);
    return vcclSuccess;
}

/*
 * Stream order on each side: every READY first; then the FIFO transfers in rounds (round k: the k-th FIFO send to
 * each peer, then the k-th FIFO receive from each peer); then the direct sends; then the waits for DONE. A wait
 * only ever depends on a peer's earlier part or earlier round, so ranks exchanging on one stream each never wait on
 * each other, however many FIFO transfers a batch holds (a FIFO send of round k waits for the credit freed by the
 * peer's receive of round k - slots). From here on every peer has enqueued its part or will: a failure gives up the
 * transfers not enqueued yet and tells their peers (IpcP2p::abandon_*), so no peer waits for ever without being
 * told.
 *
 * Receives into host memory through the FIFO land in pinned memory of the communicator's first, and reach the
 * caller's buffer only once their stream is waited for (the end of this function). A wait that ends with an error
 * (a failed peer, an abort) leaves the copy queued: it must not land in a buffer whose call failed (and which may
 * be freed by then). Pinned also keeps cudaMemcpyAsync from waiting for the stream itself, as it does into pageable
 * memory, where a blocked stream would hold this call beyond the reach of abort. Only without pinned memory does
 * the copy go to the caller's buffer directly.
 */
vcclResult_t DirectPath::enqueue(Batch& b) {
    IpcP2p* ipc = env.ipc;
    auto give_up_rest = [&](vcclResult_t failed) {
        for (size_t j = 0; j < b.n; ++j) {
            if (b.posted[j]) continue;
            const Transfer* t = b.ops[j];
            bool send = t->kind == Transfer::Send;
            if (b.path[j] == Path::Direct) send ? ipc->abandon_send(t->peer, t->stream) : ipc->abandon_recv(t->peer);
            if (b.path[j] == Path::Fifo || b.path[j] == Path::FifoDrop) {
                send ? ipc->abandon_fifo_send(t->peer, t->stream) : ipc->abandon_fifo_recv(t->peer);
            }
        }
        return failed;
    };
    {
        size_t total = 0;
        for (size_t i = 0; i < b.n; ++i) {
            if (b.path[i] == Path::Fifo && b.ops[i]->kind == Transfer::Recv && b.ops[i]->mem == MemType::Host)
                total += landing_span(b.ops[i]->bytes);
        }
        char* cursor = nullptr;
        vcclResult_t r = total > 0 ? landing_memory(total, &cursor) : vcclSuccess;
        if (r != vcclSuccess) return give_up_rest(r);
        for (size_t i = 0; i < b.n; ++i) {
            if (b.path[i] != Path::Fifo || b.ops[i]->kind != Transfer::Recv) continue;
            b.landing[i] = b.ops[i]->recvbuf;
            if (cursor == nullptr || b.ops[i]->mem != MemType::Host) continue;
            b.landing[i] = cursor;
            cursor += landing_span(b.ops[i]->bytes);
        }
    }
    for (size_t i = 0; i < b.n; ++i) {
        if (b.ops[i]->kind != Transfer::Recv) continue;
        if (b.path[i] == Path::Graph) {
            b.posted[i] = 1;
            vcclResult_t r = ipc->post_graph_recv_ready(b.ops[i]->peer, b.graph_slot[i], b.ops[i]->stream);
            if (r != vcclSuccess) return give_up_rest(r);
        }
        if (b.path[i] != Path::Direct) continue;
        b.posted[i] = 1; // given up by post_recv_ready itself when it fails
        vcclResult_t r = ipc->post_recv_ready(b.ops[i]->peer, b.ops[i]->stream, &b.seq[i]);
        if (r != vcclSuccess) return give_up_rest(r);
    }
    vcclResult_t r = enqueue_fifo_rounds(b);
    if (r != vcclSuccess) return give_up_rest(r);
    for (size_t i = 0; i < b.n; ++i) {
        const Transfer* t = b.ops[i];
        if (b.path[i] == Path::Graph && t->kind == Transfer::Send) {
            b.posted[i] = 1;
            r = ipc->post_graph_send(t->peer, b.graph_slot[i], t->sendbuf, b.theirs[i], t->stream);
            if (r != vcclSuccess) return give_up_rest(r);
            continue;
        }
        if (b.path[i] != Path::Direct || t->kind != Transfer::Send) continue;
        b.posted[i] = 1; // likewise post_send
        r = ipc->post_send(t->peer, t->sendbuf, b.theirs[i], t->stream, !t->peer_buffer_free);
        if (r != vcclSuccess) return give_up_rest(r);
        flow_posted(env.flows, ipc, t->peer, telemetry::Dir::Send, t->bytes, t->stream); // with its DONE
    }
    for (size_t i = 0; i < b.n; ++i) {
        const Transfer* t = b.ops[i];
        if (b.path[i] == Path::Graph && t->kind == Transfer::Recv) {
            r = ipc->post_graph_recv_wait(t->peer, b.graph_slot[i], t->stream);
            if (r != vcclSuccess) return r;
            continue;
        }
        if (b.path[i] != Path::Direct || t->kind != Transfer::Recv) continue;
        // A timed receive's note goes in the same driver call as its DONE wait.
        int word = -1;
        uint32_t note = 0;
        if (env.flows != nullptr) note = env.flows->posted(t->peer, telemetry::Dir::Recv, t->bytes, &word);
        r = ipc->post_recv_wait(t->peer, b.seq[i], t->stream, note != 0 ? word : -1, note);
        if (r != vcclSuccess) {
            if (note != 0) env.flows->abandoned(word, note);
            return r;
        }
    }
    VCCL_RETURN_IF_ERROR(ipc->flush()); // before the host waits below, and before the caller enqueues more
    VCCL_RETURN_IF_ERROR(keep_for_graphs(b));
    // Receives into host memory complete before the call returns, as on the host transport.
    for (size_t i = 0; i < b.n; ++i) {
        const Transfer* t = b.ops[i];
        if (b.path[i] != Path::Fifo || t->kind != Transfer::Recv || t->mem != MemType::Host) continue;
        VCCL_RETURN_IF_ERROR(env.stream_wait(t->stream));
        if (b.landing[i] != t->recvbuf && t->bytes > 0) memcpy(t->recvbuf, b.landing[i], t->bytes);
    }
    b.landing_in_use = false; // every landing copy has run
    return vcclSuccess;
}

/* Every graph that captured a transfer of the batch holds the flags and mappings it uses while it lives (one
 * graph: a call's device work is on one stream, comm/enqueue.cc). */
vcclResult_t DirectPath::keep_for_graphs(const Batch& b) {
    std::vector<vcclStream_t> kept;
    std::shared_ptr<void> keep;
    for (size_t i = 0; i < b.n; ++i) {
        const vcclStream_t stream = b.ops[i]->stream;
        if (b.path[i] != Path::Graph || std::find(kept.begin(), kept.end(), stream) != kept.end()) continue;
        kept.push_back(stream);
        if (keep == nullptr) keep = env.ipc->graph_keep();
        VCCL_RETURN_IF_ERROR(stream_capture_keep(stream, keep));
    }
    return vcclSuccess;
}

/* The FIFO transfers in rounds: each transfer's index among the FIFO transfers of its kind with its peer. */
vcclResult_t DirectPath::enqueue_fifo_rounds(Batch& b) {
    IpcP2p* ipc = env.ipc;
    std::vector<size_t> round(b.n, 0);
    size_t rounds = 0;
    {
        std::vector<std::pair<int, Transfer::Kind>> keys;
        std::vector<size_t> counts;
        for (size_t i = 0; i < b.n; ++i) {
            if (b.path[i] != Path::Fifo && b.path[i] != Path::FifoDrop) continue;
            std::pair<int, Transfer::Kind> key(b.ops[i]->peer, b.ops[i]->kind);
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
        for (Transfer::Kind kind : {Transfer::Send, Transfer::Recv}) {
            for (size_t i = 0; i < b.n; ++i) {
                if ((b.path[i] != Path::Fifo && b.path[i] != Path::FifoDrop) || round[i] != r || b.ops[i]->kind != kind)
                    continue;
                const Transfer* t = b.ops[i];
                b.posted[i] = 1; // post_fifo_* give up by themselves when they fail
                if (kind == Transfer::Recv && b.path[i] == Path::Fifo && b.landing[i] != t->recvbuf) b.landing_in_use = true;
                vcclResult_t res =
                    kind == Transfer::Send ? ipc->post_fifo_send(t->peer, t->sendbuf, t->bytes, t->stream)
                                           : ipc->post_fifo_recv(t->peer, b.path[i] == Path::Fifo ? b.landing[i] : nullptr,
                                                                 t->bytes, t->mem == MemType::Host, t->stream);
                if (res != vcclSuccess) return res;
                if (b.path[i] == Path::Fifo && kind == Transfer::Recv && t->mem == MemType::Host) {
                    if (env.flows != nullptr) env.flows->counted(t->peer, telemetry::Dir::Recv, t->bytes);
                } else if (b.path[i] == Path::Fifo) {
                    // FULL and FREE go out at once: a note is a driver call of its own (sampled transfers only).
                    flow_posted(env.flows, ipc, t->peer, kind == Transfer::Send ? telemetry::Dir::Send : telemetry::Dir::Recv,
                                t->bytes, t->stream);
                }
            }
        }
    }
    return vcclSuccess;
}

} // namespace vccl
