/* SPDX-License-Identifier: BSD-3-Clause */
#include "comm/enqueue.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>

#include "algo/device/device_coll.h"
#include "algo/premul.h"
#include "comm/group.h"
#include "exec/p2p_batch.h"
#include "algo/staged_layout.h"
#include "core/dtype.h"
#include "core/log.h"
#include "core/names.h"
#include "core/status.h"
#include "device/memory.h"
#include "transport/staging/staged_queue.h"
#include "device/copies.h"
#include "device/stream_order.h"
#include "transport/staging/staging_buffer.h"

namespace vccl {

namespace {

/* The telemetry kind of a collective (TransferTag::coll). */
uint8_t coll_kind(const Op& op) { return uint8_t(1 + int(op.coll.coll)); }

/* The bytes of the caller's data in a collective, as the counters count them. */
uint64_t call_bytes(const Op& op) { return uint64_t(op.coll.count) * dtype_size(op.coll.dtype); }

/* Collective counters (telemetry/telemetry.h on_collective): a call on device buffers counts once when enqueued,
 * with the bytes of the whole call; staged, its host pieces then add only their time; on the GPUs, one call in
 * CallTimer::kSample adds its device time for that many calls once it has run (device/call_timer.h). */
void count_device_call(vcclComm* comm, const Op& op) {
    if (comm->telemetry) comm->telemetry->on_collective(coll_kind(op), 1, call_bytes(op), 0);
}

/* Runs a host collective. `whole_call`: op is the caller's call (its call and bytes are counted with its time),
 * not one staged piece of it (only the time is). */
vcclResult_t run_collective(vcclComm* comm, const Op& op, bool whole_call = true) {
    const Algorithm* algo = algo_select(op.coll, comm->nranks, comm->settings, comm->algos, &comm->hosts);
    if (algo == nullptr) {
        return set_last_error(vcclInternalError, "no algorithm for %s", coll_name(op.coll.coll));
    }
    uint64_t seq = comm->coll_seq++;
    VCCL_TRACE(kLogColl, "%s: rank %d %s #%llu count %zu %s via %s", comm->name.c_str(), comm->rank,
               coll_name(op.coll.coll), (unsigned long long)seq, op.coll.count, dtype_name(op.coll.dtype),
               algo->name);
    vcclResult_t status;
    const uint8_t kind = coll_kind(op);
    {
        ScopedTransferTag telemetry_tag(comm->transport.get(), {kind, seq});
        CollCtx ctx(comm->transport.get(), comm->rank, comm->nranks, coll_tag(seq), op.coll.dtype, op.coll.op,
                    comm->settings, &comm->aborted, &comm->scratch);
        ctx.set_hosts(&comm->hosts);
        const uint64_t start = comm->telemetry ? comm->telemetry->now_ns() : 0;
        status = algo->run(ctx, op.coll);
        if (comm->telemetry && status == vcclSuccess) {
            comm->telemetry->on_collective(kind, whole_call ? 1 : 0, whole_call ? call_bytes(op) : 0,
                                           comm->telemetry->now_ns() - start);
        }
    }
    comm->scratch.reset();
    return status;
}

/* The host collective of one staged piece, on the slot at `slot`. */
Op host_piece(const Op& op, const StagedPiece& piece, char* slot) {
    Op h = op;
    h.mem = MemType::Host;
    h.coll = staged_host_args(op.coll, piece, slot);
    return h;
}

/* Runs a collective on device buffers through pinned host copies on the calling thread, which waits for the
 * stream (the path when the staged queue is unavailable or the call also needs the calling thread). Same
 * plan as the asynchronous path (algo/staged_layout.h): every input copied, the pieces one after the other,
 * then every output. */
vcclResult_t run_collective_staged(vcclComm* comm, const Op& op) {
    StagedPlan plan = staged_plan(comm->nranks, comm->rank, comm->dev.staging_chunk_bytes, op.coll);
    void* host = nullptr;
    VCCL_RETURN_IF_ERROR(comm->dev.staging.get(plan.slot_bytes, &host));
    char* slot = static_cast<char*>(host);
    // The copies follow the stream's earlier work in stream order, and the previous call left the slot idle
    // (its last synchronisation): one wait covers both.
    for (const StagedPiece& piece : plan.pieces) {
        for (const StagedCopy& c : piece.in) VCCL_RETURN_IF_ERROR(enqueue_staged_copy(slot, c, true, op.stream));
    }
    VCCL_RETURN_IF_ERROR(comm_stream_wait(comm, op.stream));
    for (const StagedPiece& piece : plan.pieces) {
        VCCL_RETURN_IF_ERROR(run_collective(comm, host_piece(op, piece, slot), false));
    }
    count_device_call(comm, op);
    for (const StagedPiece& piece : plan.pieces) {
        for (const StagedCopy& c : piece.out) VCCL_RETURN_IF_ERROR(enqueue_staged_copy(slot, c, false, op.stream));
    }
    // The slot is reused by the next call.
    return comm_stream_wait(comm, op.stream);
}

/* The same through the staged queue: stream-ordered, the calling thread does not wait; each piece is a part
 * of the job, so its copies overlap the other pieces' host parts. */
vcclResult_t submit_collective_staged(vcclComm* comm, const Op& op) {
    StagedPlan plan = staged_plan(comm->nranks, comm->rank, comm->dev.staging_chunk_bytes, op.coll);
    StagedQueue::Job job;
    job.stream = op.stream;
    job.host_bytes = plan.slot_bytes;
    for (size_t i = 0; i < plan.pieces.size(); ++i) {
        StagedPiece& piece = plan.pieces[i];
        StagedQueue::Part part;
        part.in = std::move(piece.in);
        part.out = std::move(piece.out);
        // The call is counted by its first piece, on the job's thread: the telemetry writer while the job runs.
        const bool first = i == 0;
        part.work = [comm, op, piece, first](char* slot) {
            vcclResult_t r = run_collective(comm, host_piece(op, piece, slot), false);
            if (r == vcclSuccess && first) count_device_call(comm, op);
            return r;
        };
        job.parts.push_back(std::move(part));
    }
    return comm->dev.staged_queue->submit(std::move(job));
}

/* Whether every operation of the call goes through host staging of device buffers (no host buffers, no
 * direct GPU path), so the whole call can be handed to the staged queue. */
bool all_staged(const vcclComm* comm, const std::vector<Op>& ops) {
    for (const Op& op : ops) {
        if (op.mem != MemType::Cuda || op.captured) return false; // a capture never goes to the staged queue
        if (op.kind == OpKind::Collective ? device_coll_direct_possible(comm->dev, op)
                                          : comm->dev.ipc != nullptr && comm->dev.ipc->reachable(op.peer))
            return false;
    }
    return true;
}

/* The communicator's staged queue, made on first use; NULL where it cannot be (then staging is synchronous). */
StagedQueue* staged_queue(vcclComm* comm, vcclStream_t stream) {
    if (comm->dev.staged_queue != nullptr || comm->dev.staged_queue_unavailable) return comm->dev.staged_queue.get();
    comm->dev.staged_queue_unavailable = true;
    int device = 0;
    if (!stream_device(stream, &device)) return nullptr;
    comm->dev.staged_queue = StagedQueue::create(
        device, comm->dev.staging_pool_bytes, &comm->aborted, &comm->dev.staged_pending,
        [comm](vcclResult_t error, const std::string& text) { comm_set_async_error(comm, error, text); },
        [comm] { comm->transport->progress(); }, comm);
    comm->dev.staged_queue_unavailable = comm->dev.staged_queue == nullptr;
    return comm->dev.staged_queue.get();
}


} // namespace

namespace {

vcclResult_t stream_wait_watching(vcclComm* comm, vcclStream_t stream, bool null_is_legacy) {
    return stream_synchronize_watching(stream, null_is_legacy, [comm]() {
        // vcclCommAbort on another thread waits for this call's lock: give it up.
        if (comm->aborted.load()) {
            return set_last_error(vcclRemoteError, "communicator %s aborted while the call waited for its stream",
                                  comm->name.c_str());
        }
        // Never waits: failed_peer() could hold this wait 100 ms.
        if (!comm_poll_peer_failure(comm)) return vcclSuccess;
        return set_last_error(vcclRemoteError, "stopped waiting for the stream: %s", comm->async_error_text.c_str());
    });
}

} // namespace

vcclResult_t comm_stream_wait(vcclComm* comm, vcclStream_t stream) { return stream_wait_watching(comm, stream, false); }

vcclResult_t CommServicesOf::stream_wait(vcclStream_t stream, bool device) {
    return stream_wait_watching(comm_, stream, device);
}

void CommServicesOf::fail(vcclResult_t error, const std::string& text) { comm_set_async_error(comm_, error, text); }

vcclResult_t comm_device_stream_wait(vcclComm* comm, vcclStream_t stream) {
    return stream_wait_watching(comm, stream, true);
}

namespace {

/* A call on a stream being captured into a CUDA graph: what can be captured is (device_coll_capturable); the rest is
 * refused before anything is enqueued, with what would make it capturable. */
vcclResult_t check_capturable(vcclComm* comm, const Op& op) {
    if (op.kind != OpKind::Collective) {
        // Captured transfers take the direct path's graph protocol (transport/cuda_ipc/ipc_p2p.h).
        if (op.bytes == 0 || (comm->dev.ipc != nullptr && comm->dev.ipc->reachable(op.peer))) return vcclSuccess;
        return set_last_error(vcclInvalidUsage, "%s %s rank %d cannot be captured into a CUDA graph: captured send/recv "
                              "needs the direct path between GPUs of one host (VCCL_P2P_DIRECT), which that rank is "
                              "not on: call it outside the capture", op.kind == OpKind::Send ? "send" : "recv",
                              op.kind == OpKind::Send ? "to" : "from", op.peer);
    }
    if (device_coll_capturable(comm->dev, op)) return vcclSuccess;
    const size_t limit = comm->dev.ipc != nullptr ? comm->dev.ipc->ll_bytes() : 0;
    return set_last_error(vcclInvalidUsage, "%s of %zu bytes cannot be captured into a CUDA graph: captured collectives "
                          "run in the low-latency kernel, which needs device buffers, every rank on this host and at "
                          "most %zu bytes a peer (VCCL_ALLREDUCE_LL_BYTES; off where ranks share a GPU): call it "
                          "outside the capture",
                          coll_name(op.coll.coll), op.coll.count * dtype_size(op.coll.dtype), limit);
}

} // namespace

vcclResult_t enqueue(const Op& op) {
    const bool capturing = op.stream != nullptr && stream_capturing(op.stream);
    if (capturing && op.mem == MemType::Cuda) {
        Op captured = op;
        captured.captured = true;
        VCCL_RETURN_IF_ERROR(check_capturable(op.comm, captured));
        if (group_active()) {
            group_add(captured);
            return vcclSuccess;
        }
        return run_comm_ops(op.comm, std::vector<Op>{captured});
    }
    if (capturing) {
        return set_last_error(vcclInvalidUsage, "%s on host buffers cannot be captured into a CUDA graph: call it "
                              "outside the capture", op.kind == OpKind::Collective ? coll_name(op.coll.coll)
                                                     : op.kind == OpKind::Send    ? "send" : "recv");
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
        return set_last_error(vcclInvalidUsage, "communicator %s was %s", comm->name.c_str(),
                              comm->revoked.load() ? "revoked" : "aborted");
    }
    // A peer's failure refuses the calls after it also where the caller does not poll vcclCommGetAsyncError:
    // its work would wait for the peer's flags for ever (until abort). Only calls with device work look: the
    // look makes the communicator's GPU current, which a host-memory call's thread may never have done.
    const bool device_work = std::any_of(ops.begin(), ops.end(), [](const Op& op) { return op.mem == MemType::Cuda; });
    const bool captured = std::any_of(ops.begin(), ops.end(), [](const Op& op) { return op.captured; });
    // The calls this one makes beside what it captures (reads of the peers' FAIL words on private streams) must not
    // disturb the capture (device/memory.h).
    std::optional<RelaxedCapture> relaxed;
    if (device_work) relaxed.emplace();
    if (captured && !std::all_of(ops.begin(), ops.end(), [](const Op& op) { return op.captured; })) {
        return set_last_error(vcclInvalidUsage, "a group mixes calls on a stream being captured into a CUDA graph "
                              "with others: capture the whole group, or none of it");
    }
    if (device_work && comm->async_error.load() == vcclSuccess) comm_poll_peer_failure(comm);
    vcclResult_t failed = vcclResult_t(comm->async_error.load());
    if (failed != vcclSuccess) {
        return set_last_error(failed, "communicator %s failed earlier: %s", comm->name.c_str(),
                              comm->async_error_text.c_str());
    }
    // Device work runs in call order whatever streams the calls use (device/stream_order.h).
    std::vector<vcclStream_t> streams;
    for (const Op& op : ops) {
        if (op.mem == MemType::Cuda && std::find(streams.begin(), streams.end(), op.stream) == streams.end()) {
            streams.push_back(op.stream);
        }
    }
    std::vector<Transfer> p2p;
    // Captured work is ordered by the graph and by where the application launches it; an event of the eager calls
    // cannot be waited for inside a capture (nor one recorded in it outside).
    vcclResult_t status = captured ? vcclSuccess : comm->dev.stream_order.before(streams);
    StagedQueue* queue = all_staged(comm, ops) ? staged_queue(comm, ops.front().stream) : nullptr;
    // One stream per call. The direct path tells a pair's transfers apart by sequence numbers that the device
    // waits for as "at least this one" (transport/cuda_ipc/ipc_p2p.h), in the order the call enqueues them: on two streams
    // of one call, a later transfer's flag could satisfy the wait for an earlier one whose stream was still
    // busy (the receiver read its buffer before the data, or the sender wrote into a receive buffer the
    // receiver's stream still used). So a call whose device work names several streams runs it all on the
    // last one, which first waits for the others; they wait for it at the end. (The staged queue joins its
    // streams the same way in submit_p2p_staged.)
    std::vector<Op> joined;
    const std::vector<Op>* run = &ops;
    const vcclStream_t main_stream = streams.empty() ? nullptr : streams.back();
    if (streams.size() > 1 && queue == nullptr && status == vcclSuccess) {
        for (vcclStream_t s : streams) {
            if (status == vcclSuccess) status = stream_wait_for(main_stream, s);
        }
        joined = ops;
        for (Op& op : joined) {
            if (op.mem == MemType::Cuda) op.stream = main_stream;
        }
        run = &joined;
    }
    if (queue == nullptr && comm->dev.staged_queue != nullptr) {
        // Earlier staged jobs own the transport until they end, and they must reach the network before this
        // call's traffic does on every rank: the one place the calling thread waits for the device.
        comm->dev.staged_queue->wait_idle();
    }
    // Device-path telemetry whose notes have come (telemetry/device_flows.h): once per call, where this thread is the
    // only writer (no staged job runs).
    if (queue == nullptr && comm->device_flows) comm->device_flows->poll();
    if (queue == nullptr && comm->telemetry && !comm->dev.call_timer.idle()) {
        RelaxedCapture beside_captures; // also from a host-memory call, whose thread may be capturing
        comm->dev.call_timer.poll([comm](uint8_t kind, uint64_t ns) { comm->telemetry->on_collective(kind, 0, 0, ns); });
    }
    // PreMulSum calls become Sums over their inputs multiplied by the scalar (algo/premul.h), each scaled right
    // before it runs. A failure there leaves the peers' parts of the call unmatched: the communicator fails.
    PreMulCall premul; // the scaled inputs, read by the collectives below
    bool premul_failed = false;
    if (status == vcclSuccess) {
        status = premul_reserve(comm->dev, *run, queue != nullptr, &premul);
        premul_failed = status != vcclSuccess;
    }
    size_t started = 0; // ops of *run this call ran or began to run
    for (size_t i = 0; i < run->size() && status == vcclSuccess; ++i) {
        ++started;
        if ((*run)[i].kind != OpKind::Collective) {
            p2p.push_back(op_transfer((*run)[i]));
            continue;
        }
        Op op = (*run)[i];
        status = premul_apply(comm->dev, &op, queue != nullptr, &premul);
        if (status != vcclSuccess) {
            premul_failed = true;
            --started; // it never began: given up below with the rest
            break;
        }
        if (queue != nullptr) {
            status = submit_collective_staged(comm, op);
        } else if (device_coll_direct_possible(comm->dev, op)) {
            const bool timed = comm->telemetry && !op.captured &&
                               comm->dev.call_timer.begin(op.stream, coll_kind(op), comm->dev.device());
            status = run_device_coll_direct(comm->dev, op);
            if (timed) comm->dev.call_timer.end(op.stream, status == vcclSuccess);
            // Replays of a captured call are not seen on the host: neither is its capture counted.
            if (status == vcclSuccess && !op.captured) count_device_call(comm, op);
        } else if (op.mem == MemType::Cuda) {
            status = run_collective_staged(comm, op);
        } else {
            // Host buffers with a stream: the call synchronises the stream first (documented), then runs.
            status = comm_stream_wait(comm, op.stream);
            if (status == vcclSuccess) status = run_collective(comm, op);
        }
        if (status != vcclSuccess) break;
    }
    if (status == vcclSuccess && !p2p.empty()) {
        std::vector<const Transfer*> batch;
        for (const Transfer& t : p2p) batch.push_back(&t);
        status = queue != nullptr ? submit_p2p_staged(comm->dev, batch) : run_p2p_batch(comm->dev, batch);
    }
    // Collectives left out after a failure: those the low-latency kernel would have run still take their call
    // numbers and tell the peers, whose kernels would otherwise wait for them, or pair with this rank's next one.
    if (status != vcclSuccess && queue == nullptr) {
        for (size_t i = started; i < run->size(); ++i) device_coll_give_up(comm->dev, (*run)[i]);
    }
    // Also after a failure: whatever was enqueued stays ordered before later calls.
    vcclResult_t ordered = vcclSuccess;
    if (run == &joined) {
        for (vcclStream_t s : streams) {
            vcclResult_t r = stream_wait_for(s, main_stream);
            if (ordered == vcclSuccess) ordered = r;
        }
    }
    // Joined, the other streams already wait for the last one: the call's end is recorded there alone.
    vcclResult_t after =
        captured ? vcclSuccess
                 : comm->dev.stream_order.after(run == &joined ? std::vector<vcclStream_t>{main_stream} : streams);
    if (ordered == vcclSuccess) ordered = after;
    if (status == vcclSuccess) status = ordered;
    // Peer loss and timeouts leave the communicator unusable; argument errors do not. Neither does a PreMulSum
    // input that could not be scaled: the peers may have begun that collective, and this rank's next call would
    // pair with their parts of it.
    if (status == vcclRemoteError || status == vcclTimeout || status == vcclSystemError || premul_failed) {
        comm_set_async_error(comm, status, last_error_message());
    }
    return status;
}

} // namespace vccl
