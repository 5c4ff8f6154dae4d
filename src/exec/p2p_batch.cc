/* SPDX-License-Identifier: BSD-3-Clause */
#include "exec/p2p_batch.h"

#include <algorithm>
#include <string>

#include "core/status.h"
#include "device/copies.h"

namespace vccl {

namespace {

/* Device sends whose buffer a device receive of the same batch writes (in-place exchange) send from a copy taken
 * before anything of the batch is enqueued, in the communicator's in-place scratch (kept between calls: with a
 * stream-ordered allocation per call an in-place send/recv of 8 B-32 KiB took 26-32 us on 2x H200, with the kept
 * scratch 23-25; out of place 11-18: the copy must end before this rank's READY); the receive's stream waits for
 * the copy. Calls reuse the scratch safely because the communicator's device work runs in call order
 * (stream_order), and each batch's sends read it before anything later is enqueued. The copies of one batch sit
 * side by side. */
vcclResult_t take_in_place_copies(DevicePath& dev, const std::vector<const Transfer*>& batch,
                                  std::vector<Transfer>* storage, std::vector<const Transfer*>* out) {
    *out = batch;
    auto overlapping_recv = [&](const Transfer* send, const Transfer* other) {
        return other->kind == Transfer::Recv && other->mem == MemType::Cuda &&
               ranges_overlap(send->sendbuf, send->bytes, other->recvbuf, other->bytes);
    };
    auto needs_copy = [&](const Transfer* t) {
        if (t->kind != Transfer::Send || t->mem != MemType::Cuda || t->bytes == 0) return false;
        for (const Transfer* other : batch) {
            if (overlapping_recv(t, other)) return true;
        }
        return false;
    };
    size_t total = 0;
    for (const Transfer* t : batch) {
        if (needs_copy(t)) total += DeviceScratch::slot_bytes(t->bytes);
    }
    if (total == 0) return vcclSuccess;
    void* base = nullptr;
    VCCL_RETURN_IF_ERROR(dev.in_place_scratch.get(total, nullptr, &base));
    storage->reserve(batch.size());
    size_t at = 0;
    for (size_t i = 0; i < batch.size(); ++i) {
        const Transfer* t = batch[i];
        if (!needs_copy(t)) continue;
        void* copy = static_cast<char*>(base) + at;
        at += DeviceScratch::slot_bytes(t->bytes);
        VCCL_RETURN_IF_ERROR(copy_device_to_device(copy, t->sendbuf, t->bytes, t->stream));
        storage->push_back(*t);
        storage->back().sendbuf = copy;
        (*out)[i] = &storage->back();
        for (const Transfer* other : batch) {
            if (overlapping_recv(t, other)) VCCL_RETURN_IF_ERROR(stream_wait_for(other->stream, t->stream));
        }
    }
    return vcclSuccess;
}

/* A batch captured into a CUDA graph: the direct path's graph protocol takes all of it (empty transfers have nothing
 * to do), or the call fails. An in-place exchange would send from a copy in scratch memory that later calls reuse
 * while the graph lives, so it is refused. */
vcclResult_t captured_batch(const std::vector<const Transfer*>& batch, std::vector<const Transfer*>* out) {
    for (const Transfer* t : batch) {
        if (t->bytes == 0) continue;
        if (t->kind == Transfer::Send) {
            for (const Transfer* other : batch) {
                if (other->kind == Transfer::Recv && ranges_overlap(t->sendbuf, t->bytes, other->recvbuf, other->bytes))
                    return set_last_error(vcclInvalidUsage, "a send captured into a CUDA graph reads a buffer that a "
                                          "receive of its group writes (in place): capture it with separate buffers");
            }
        }
        out->push_back(t);
    }
    return vcclSuccess;
}

} // namespace

vcclResult_t run_p2p_batch(DevicePath& dev, const std::vector<const Transfer*>& batch) {
    std::vector<Transfer> storage;
    std::vector<const Transfer*> copied;
    const bool captured = !batch.empty() && batch.front()->captured; // all or none (comm/enqueue.cc)
    VCCL_RETURN_IF_ERROR(captured ? captured_batch(batch, &copied)
                                  : take_in_place_copies(dev, batch, &storage, &copied));
    std::vector<const Transfer*> rest, none;
    std::string mismatch, unused;
    VCCL_RETURN_IF_ERROR(dev.direct.post(copied, &rest, &mismatch));
    if (captured && mismatch.empty() && !rest.empty()) {
        return set_last_error(vcclInvalidUsage, "a send/recv captured into a CUDA graph cannot take the direct path "
                              "between GPUs (rank %d): call it outside the capture", rest.front()->peer);
    }
    vcclResult_t status = dev.staged.post(rest, &none, &unused);
    if (mismatch.empty()) return status;
    return set_last_error(vcclInvalidUsage, "%s", mismatch.c_str());
}

vcclResult_t submit_p2p_staged(DevicePath& dev, const std::vector<const Transfer*>& batch) {
    // One job on the last transfer's stream: the batch's other streams hand over to it first and wait for it
    // after, so each stream's later work sees its receives.
    vcclStream_t stream = batch.back()->stream;
    std::vector<vcclStream_t> others;
    for (const Transfer* t : batch) {
        if (t->stream != stream && std::find(others.begin(), others.end(), t->stream) == others.end())
            others.push_back(t->stream);
    }
    for (vcclStream_t s : others) VCCL_RETURN_IF_ERROR(stream_wait_for(stream, s));
    // Part k moves piece k of every transfer that has one (host_batch_pieces): the stream copies piece k + 1 in
    // while the proxy moves piece k.
    StagedQueue::Job job;
    job.stream = stream;
    std::vector<Transfer> host;
    std::vector<size_t> offsets;
    const HostBatchEnv& env = dev.staged.env.host;
    for (const Transfer* t : batch) {
        offsets.push_back(job.host_bytes);
        PieceCut pieces = host_batch_pieces(env, t->bytes);
        if (job.parts.size() < pieces.size()) job.parts.resize(pieces.size());
        char* device = static_cast<char*>(t->kind == Transfer::Send ? const_cast<void*>(t->sendbuf) : t->recvbuf);
        for (size_t k = 0; k < pieces.size(); ++k) {
            // Sends are copied out before any receive is copied in (all inputs go first, StagedQueue::Job), so
            // an in-place exchange sends the old data.
            ElemPiece piece = pieces[k];
            StagedQueue::Copy c{device + piece.first, job.host_bytes + piece.first, piece.count};
            (t->kind == Transfer::Send ? job.parts[k].in : job.parts[k].out).push_back(c);
        }
        job.host_bytes += t->bytes;
        host.push_back(*t);
        host.back().mem = MemType::Host;
    }
    for (size_t k = 0; k < job.parts.size(); ++k) {
        job.parts[k].work = [env, host, offsets, k](char* slot) mutable {
            std::vector<const Transfer*> ptrs;
            for (size_t i = 0; i < host.size(); ++i) {
                Transfer& h = host[i];
                if (h.kind == Transfer::Send) {
                    h.sendbuf = slot + offsets[i];
                } else {
                    h.recvbuf = slot + offsets[i];
                }
                ptrs.push_back(&h);
            }
            return host_batch_run(env, ptrs, long(k));
        };
    }
    vcclResult_t status = dev.staged_queue->submit(std::move(job));
    for (vcclStream_t s : others) {
        vcclResult_t r = stream_wait_for(s, stream);
        if (status == vcclSuccess) status = r;
    }
    return status;
}

} // namespace vccl
