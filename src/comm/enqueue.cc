#include "comm/enqueue.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>

#include "comm/device_coll.h"
#include "comm/group.h"
#include "comm/p2p_exec.h"
#include "comm/staged_pieces.h"
#include "core/dtype.h"
#include "core/log.h"
#include "core/status.h"
#include "device/memory.h"
#include "device/staged_queue.h"
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

/* Where a staged collective's input and output sit in its pinned copy (in + out bytes). In place, the
 * smaller region lies inside the larger one (both may start at the same address): it is placed inside the
 * larger one's copy, so the host algorithm sees the same aliasing. */
struct StagedLayout {
    size_t in = 0, out = 0;
    size_t send_offset = 0, recv_offset = 0;
};

StagedLayout staged_layout(const vcclComm* comm, const Op& op) {
    StagedLayout l;
    coll_io_bytes(comm, op.coll, &l.in, &l.out);
    const char* dsend = static_cast<const char*>(op.coll.sendbuf);
    const char* drecv = static_cast<const char*>(op.coll.recvbuf);
    l.recv_offset = l.in;
    if (l.in >= l.out && inside(drecv, dsend, l.in)) {
        l.recv_offset = size_t(drecv - dsend); // e.g. ReduceScatter: the output block inside the input
    } else if (inside(dsend, drecv, l.out)) {
        l.send_offset = l.in + size_t(dsend - drecv); // e.g. AllGather: the input block inside the output
    } else if (inside(drecv, dsend, l.in)) {
        l.recv_offset = size_t(drecv - dsend);
    }
    return l;
}

/* The collective op on host buffers at `host` laid out as `l`. */
Op host_collective(const Op& op, const StagedLayout& l, char* host) {
    Op h = op;
    h.mem = MemType::Host;
    h.coll.sendbuf = op.coll.sendbuf != nullptr ? host + l.send_offset : nullptr;
    h.coll.recvbuf = op.coll.recvbuf != nullptr ? host + l.recv_offset : nullptr;
    return h;
}

/* The staged collective's pieces (comm/staged_pieces.h): element ranges for AllReduce, Broadcast and Reduce,
 * one piece for the others. */
std::vector<ElemPiece> pieces_of(const vcclComm* comm, const Op& op) {
    CollType c = op.coll.coll;
    if (c != CollType::AllReduce && c != CollType::Broadcast && c != CollType::Reduce) return {{0, op.coll.count}};
    return staged_pieces(op.coll.count, dtype_size(op.coll.dtype), comm->staging_chunk_bytes);
}

/* The host collective of one piece: the elements [first, first + count) of the buffers at `host`. */
Op host_piece(const Op& op, const StagedLayout& l, char* host, const ElemPiece& piece) {
    Op h = host_collective(op, l, host);
    size_t skip = piece.first * dtype_size(op.coll.dtype);
    h.coll.count = piece.count;
    if (h.coll.sendbuf != nullptr) h.coll.sendbuf = static_cast<const char*>(h.coll.sendbuf) + skip;
    if (h.coll.recvbuf != nullptr) h.coll.recvbuf = static_cast<char*>(h.coll.recvbuf) + skip;
    return h;
}

/* Runs a collective on device buffers through pinned host copies on the calling thread, which waits for the
 * stream (the path when the staged queue is unavailable or the call also needs the calling thread). The
 * pieces run one after the other, as peers on the asynchronous path run them. */
vcclResult_t run_collective_staged(vcclComm* comm, const Op& op) {
    StagedLayout l = staged_layout(comm, op);
    void* host = nullptr;
    VCCL_RETURN_IF_ERROR(comm->staging.get(l.in + l.out, &host));
    char* base = static_cast<char*>(host);
    VCCL_RETURN_IF_ERROR(stream_synchronize(op.stream));
    if (l.in > 0) VCCL_RETURN_IF_ERROR(copy_device_to_host(base + l.send_offset, op.coll.sendbuf, l.in, op.stream));
    for (const ElemPiece& piece : pieces_of(comm, op)) {
        VCCL_RETURN_IF_ERROR(run_collective(comm, host_piece(op, l, base, piece)));
    }
    if (l.out > 0) VCCL_RETURN_IF_ERROR(copy_host_to_device(op.coll.recvbuf, base + l.recv_offset, l.out, op.stream));
    return vcclSuccess;
}

/* The same through the staged queue: stream-ordered, the calling thread does not wait; each piece is a part
 * of the job, so its copies overlap the other pieces' host parts. */
vcclResult_t submit_collective_staged(vcclComm* comm, const Op& op) {
    StagedLayout l = staged_layout(comm, op);
    std::vector<ElemPiece> pieces = pieces_of(comm, op);
    StagedQueue::Job job;
    job.stream = op.stream;
    job.host_bytes = l.in + l.out;
    size_t elem = dtype_size(op.coll.dtype);
    for (const ElemPiece& piece : pieces) {
        StagedQueue::Part part;
        // One piece: the whole regions (AllGather and the others have in != out); pieces: their elements.
        size_t skip = piece.first * elem, bytes = piece.count * elem;
        size_t in = pieces.size() == 1 ? l.in : l.in > 0 ? bytes : 0;
        size_t out = pieces.size() == 1 ? l.out : l.out > 0 ? bytes : 0;
        if (in > 0) {
            char* src = const_cast<char*>(static_cast<const char*>(op.coll.sendbuf));
            part.in.push_back({src + skip, l.send_offset + skip, in});
        }
        if (out > 0) part.out.push_back({static_cast<char*>(op.coll.recvbuf) + skip, l.recv_offset + skip, out});
        part.work = [comm, op, l, piece](char* host) { return run_collective(comm, host_piece(op, l, host, piece)); };
        job.parts.push_back(std::move(part));
    }
    return comm->staged_queue->submit(std::move(job));
}

/* Whether every operation of the call goes through host staging of device buffers (no host buffers, no
 * direct GPU path), so the whole call can be handed to the staged queue. */
bool all_staged(const vcclComm* comm, const std::vector<Op>& ops) {
    for (const Op& op : ops) {
        if (op.mem != MemType::Cuda) return false;
        if (op.kind == OpKind::Collective ? device_coll_direct_possible(comm, op)
                                          : comm->ipc != nullptr && comm->ipc->reachable(op.peer))
            return false;
    }
    return true;
}

/* The communicator's staged queue, made on first use; NULL where it cannot be (then staging is synchronous). */
StagedQueue* staged_queue(vcclComm* comm, vcclStream_t stream) {
    if (comm->staged_queue != nullptr || comm->staged_queue_unavailable) return comm->staged_queue.get();
    comm->staged_queue_unavailable = true;
    int device = 0;
    if (!stream_device(stream, &device)) return nullptr;
    comm->staged_queue = StagedQueue::create(
        device, comm->staging_pool_bytes, &comm->aborted, &comm->staged_pending,
        [comm](vcclResult_t error, const std::string& text) { comm_set_async_error(comm, error, text); },
        [comm] { comm->transport->progress(); });
    comm->staged_queue_unavailable = comm->staged_queue == nullptr;
    return comm->staged_queue.get();
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
    StagedQueue* queue = all_staged(comm, ops) ? staged_queue(comm, ops.front().stream) : nullptr;
    if (queue == nullptr && comm->staged_queue != nullptr) {
        // Earlier staged jobs own the transport until they end, and they must reach the network before this
        // call's traffic does on every rank: the one place the calling thread waits for the device.
        comm->staged_queue->wait_idle();
    }
    for (const Op& op : ops) {
        if (status != vcclSuccess) break;
        if (op.kind != OpKind::Collective) {
            p2p.push_back(&op);
        } else if (queue != nullptr) {
            status = submit_collective_staged(comm, op);
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
        status = queue != nullptr ? submit_p2p_staged(comm, queue, p2p) : run_p2p_batch(comm, p2p);
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
