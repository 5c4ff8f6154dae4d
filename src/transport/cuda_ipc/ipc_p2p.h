/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * SM-free send/recv between GPUs of one host: no kernel is launched. The sender's copy engine writes
 * straight into the receiver's buffer (CUDA IPC mapping) and stream memory operations keep both streams in
 * order:
 *
 *   receiver stream: write READY(seq) into the sender's flags ......... wait DONE >= seq (own flags)
 *   sender stream:   wait READY >= seq (own flags), copy into the peer buffer, write DONE(seq) to the peer
 *
 * Small transfers (up to VCCL_P2P_FIFO_BYTES from a device buffer) go through a staging FIFO instead, so
 * the sender never waits for a per-transfer READY: every rank exports, next to its flags, VCCL_P2P_FIFO_SLOTS
 * slots per sending peer of this host, and credits bound how far a sender runs ahead:
 *
 *   sender stream:   wait FREE >= n - slots (own flags), copy into slot n of the peer, write FULL(n) to the peer
 *   receiver stream: wait FULL >= n (own flags), copy slot n into the receive buffer, write FREE(n) to the sender
 *
 * Credits move in batches of half the slots (one FREE wait and one FREE write per batch,
 * transport/cuda_ipc/fifo_credits.h), since every enqueued stream operation costs the host 1-2 us.
 *
 * Transfers captured into a CUDA graph cannot count: every replay runs the same stream operations with the same
 * values. Each captured transfer gets a slot of its own for its pair and direction (numbered in capture order on
 * both sides, checked through the descriptors), two words that the replays set and reset:
 *
 *   receiver stream: write GREADY[slot] = 1 into the sender's flags .... wait GDONE[slot] == 1 (own), write it 0
 *   sender stream:   wait GREADY[slot] == 1 (own), write it 0, copy into the peer buffer, write GDONE[slot] = 1
 *
 * A word is reset by its waiter before the stream goes on, and set again only after the other side has seen what
 * followed the reset, so replays in any number pair one to one. Captured transfers always take this rendezvous
 * (never the FIFO) and need the direct path: no kernel in the graph, nothing on the host at replay.
 *
 * The flags and slots live in one device buffer every rank exports at communicator creation. The calling
 * threads only exchange descriptors over the host transport, and never wait for device work. The sender
 * describes its buffer first and decides: FIFO (small, device memory, peer set up for it) or rendezvous.
 * A FIFO sender goes on at once; the receiver learns the choice (and checks the size) from the sender's
 * descriptor. For a rendezvous the receiver answers with its own descriptor, and both sides decide the same
 * way whether the direct path is used (device memory on both sides and an IPC-exportable receive buffer) or
 * the staged one.
 */
#ifndef VCCL_TRANSPORT_CUDA_IPC_IPC_P2P_H_
#define VCCL_TRANSPORT_CUDA_IPC_IPC_P2P_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "device/kernels/chunked_collectives.h"
#include "device/kernels/ll_collectives.h"
#include "transport/cuda_ipc/registrations.h"
#include "vccl.h"

namespace vccl {

class Bootstrap;

/* What one side of a transfer tells the other before anything moves. Plain bytes: sent as a message. */
struct P2pDescriptor {
    uint32_t magic;
    uint32_t flags;       // kDescDevice: this side's buffer is device memory; kDescIpc: handle is valid
    uint64_t bytes;
    uint64_t offset;      // of the receive buffer inside its exported allocation
    uint64_t alloc_base;  // the allocation's address and size in the receiver's process: a new allocation
    uint64_t alloc_size;  // over an old one's range means the old mapping is stale
    char handle[64];      // cudaIpcMemHandle_t of the receive buffer's allocation (receiver only)
    uint32_t graph_slot;  // with kDescGraph: the transfer's graph slot on this side (equal on both when matched)
    uint32_t reserved;
};
constexpr uint32_t kDescMagic = 0x76503250u;
constexpr uint32_t kDescDevice = 1u;
constexpr uint32_t kDescIpc = 2u;
constexpr uint32_t kDescFifo = 4u;    // sender only: this transfer goes through the receiver's staging FIFO
constexpr uint32_t kDescVmm = 8u;     // with kDescIpc: handle is a VmmRef, the allocation's descriptor comes by socket
constexpr uint32_t kDescGraph = 16u;  // this side is being captured into a CUDA graph; graph_slot is its slot

/* The handle of VMM memory (device/vmm.h: a vcclMemAlloc allocation, or a span of another allocator's): the
 * file descriptors themselves travel over the communicator's descriptor socket (transport/cuda_ipc/fd_channel.h), keyed
 * by id, just before the P2pDescriptor. */
struct VmmRef {
    uint32_t magic; // kVmmMagic
    uint32_t flags; // kVmmSpan
    uint64_t id;    // the allocation's or span's id in the exporting process (never reused there)
    uint64_t size;  // bytes to map
};
constexpr uint32_t kVmmMagic = 0x766d6d31u;
constexpr uint32_t kVmmSpan = 1u; // another allocator's memory: overlapping spans may all be live

class IpcP2p {
public:
    virtual ~IpcP2p() = default;

    /* Collective over the bootstrap. Always succeeds with an object; peers it cannot reach (other hosts,
     * no CUDA, a failed export) are simply not reachable(). host_ids: per rank, equal on one host. test_key: the
     * communicator, for the test points (core/test_point.h). */
    static vcclResult_t create(Bootstrap* bootstrap, const std::vector<uint64_t>& host_ids, const void* test_key,
                               std::unique_ptr<IpcP2p>* out);

    /* Same host and both sides set up: sends and receives with this peer exchange descriptors. Symmetric. */
    virtual bool reachable(int peer) const = 0;
    /* Every pair of ranks mapped each other (the whole matrix, the same answer on every rank): the direct
     * device collectives need it. Each rank's own row was not enough: with B and C unable to map each other,
     * A took the direct algorithm while B and C staged, and the call hung. */
    virtual bool everyone_reachable() const = 0;
    /* Describes this side's buffer. Receivers export their allocation when they can (for `peer`, which then
     * maps it; -1 when the sender's buffer rules out a direct transfer: nothing is exported); a registered
     * buffer (reg, may be NULL) is described from its registration without asking the driver. A VMM
     * buffer's file descriptors are sent to `peer` here, before the descriptor goes out. */
    virtual void describe(int peer, const void* buf, size_t bytes, bool is_recv, const Registration* reg,
                          P2pDescriptor* out) = 0;
    /* Exports the allocation(s) holding device buffer [buf, buf + bytes) into r (vcclCommRegister); false
     * when it cannot. */
    virtual bool export_buffer(const void* buf, size_t bytes, Registration* r) = 0;
    /* True when both descriptors allow the direct path. */
    static bool direct(const P2pDescriptor& send, const P2pDescriptor& recv) {
        return (send.flags & kDescDevice) && (recv.flags & kDescDevice) && (recv.flags & kDescIpc);
    }
    /* Receiver, step 1 (before any send of the batch is enqueued): publish READY on `stream`; *seq names the
     * transfer for step 2. */
    virtual vcclResult_t post_recv_ready(int peer, void* stream, uint32_t* seq) = 0;
    /* Sender: wait for READY, copy into the peer's buffer, publish DONE; all on `stream`. Without `wait_ready`
     * the READY wait is left out (still counted): the caller knows the peer's buffer is free already, because
     * `stream` waited for something the peer's stream did after it reached the transfer (Transfer::peer_buffer_free). */
    virtual vcclResult_t post_send(int peer, const void* buf, const P2pDescriptor& recv_desc, void* stream,
                                   bool wait_ready = true) = 0;
    /* Receiver, step 2 (after the batch's sends): wait for DONE of transfer `seq` on `stream`; then, when
     * note_word >= 0, the stream writes note_value into that note word (below), in the same driver call. */
    virtual vcclResult_t post_recv_wait(int peer, uint32_t seq, void* stream, int note_word = -1,
                                        uint32_t note_value = 0) = 0;
    /* READY and DONE writes are enqueued together with their stream's next memory operation (one driver
     * call); flush() enqueues what is left. Callers flush at the end of every batch, before anything else
     * (a kernel, a copy, the caller's own work) may be enqueued on those streams. */
    virtual vcclResult_t flush() = 0;

    /* Transfers captured into a CUDA graph (the header says how they pair). graph_slots hands out the next `count`
     * slots for sends to (receives from) `peer`, in capture order, into *first; false when the communicator's
     * kGraphSlots per pair and direction are used up. The posts mirror the eager ones, with slots for sequence
     * numbers; post_graph_send holds the receive buffer's mapping open. graph_keep() is what the batch's graph must
     * hold while it lives (taken once per captured batch, also after a failure, which then lets go at once): this
     * rank's flags and the peers', left to the last graph when the communicator goes first, and the mappings the
     * batch's sends copy into. */
    static constexpr uint32_t kGraphSlots = 1024;
    virtual bool graph_slots(int peer, bool send, uint32_t count, uint32_t* first) = 0;
    virtual vcclResult_t post_graph_recv_ready(int peer, uint32_t slot, void* stream) = 0;
    virtual vcclResult_t post_graph_send(int peer, uint32_t slot, const void* buf, const P2pDescriptor& recv_desc,
                                         void* stream) = 0;
    virtual vcclResult_t post_graph_recv_wait(int peer, uint32_t slot, void* stream) = 0;
    virtual std::shared_ptr<void> graph_keep() = 0;
    /* A graph that captured transfers of this object is alive: one of its replays may be stuck on a peer that
     * will never replay, so teardown must not wait for the device on the caller's thread. */
    virtual bool graphs_hold_transfers() const = 0;

    /* Largest transfer the staging FIFO with `peer` takes (0: no FIFO with it). Equal on both sides. */
    virtual size_t fifo_bytes(int peer) const = 0;
    /* FIFO sender: wait for a free slot, copy `bytes` of `buf` (device memory) into it, publish FULL; all on
     * `stream`. Never waits for the receiver to have posted. */
    virtual vcclResult_t post_fifo_send(int peer, const void* buf, size_t bytes, void* stream) = 0;
    /* FIFO receiver: wait for the next FULL from `peer`, copy the slot into `buf` (device memory, or host
     * memory when `to_host`; nullptr drops the data, used when the sizes did not match), publish FREE; all on
     * `stream`. */
    virtual vcclResult_t post_fifo_recv(int peer, void* buf, size_t bytes, bool to_host, void* stream) = 0;
    /* A FIFO transfer announced to (by) `peer` will not be enqueued: tells the peer (FAIL) and keeps the
     * sequence numbers in step. A given-up send also publishes its FULL so the receiver's stream goes on (the
     * data is not valid); a given-up receive frees nothing, so the sender stalls once its credits are spent,
     * until abort or destroy releases it (release_waits). */
    virtual void abandon_fifo_send(int peer, void* stream) = 0;
    virtual void abandon_fifo_recv(int peer) = 0;
    /* Tells `peer` that this rank found a transfer with it wrong (its vcclCommGetAsyncError reports it). */
    virtual void report_failure(int peer) = 0;

    /* The caller gave up a direct send (recv) with `peer` of a batch whose descriptors were exchanged,
     * before post_send (post_recv_ready) enqueued it: tells the peer, whose vcclCommGetAsyncError then
     * reports it, and for a send lets the peer's receiving stream go on (its data is not valid). post_send
     * and post_recv_ready do this themselves when they fail. Keeps both sides' sequence numbers in step.
     * A send's release is written on `stream` (the batch's) where it can be, after this rank's earlier
     * transfers to the peer: written at once, it let the peer's wait for an earlier transfer still queued
     * here pass before that transfer's data had landed. */
    virtual void abandon_send(int peer, void* stream) = 0;
    virtual void abandon_recv(int peer) = 0;
    /* A rank that gave up a transfer with this rank (abandon_*), or -1. Any thread; reads this rank's flags
     * on a private stream, waiting at most 100 ms for the read. */
    virtual int failed_peer() = 0;
    /* The same without waiting, for every call with device work: at most once per 10 ms it starts a read of
     * the FAIL words on a private stream and looks at the read it started before (one stuck for 20 ms behind a
     * blocked stream is left, and the next goes on another), so a program calling often sees a failure about
     * 20 ms after it was written. -1 also while failed_peer() holds the flags. */
    virtual int failed_peer_polled() = 0;
    /* The same as failed_peer() without its limit of one read per millisecond, waiting at most `wait_ms`
     * (vcclCommGetTelemetry and destroy: device-path records seen done wait for a read; telemetry/device_flows.h). */
    virtual int failed_peer_now(int64_t wait_ms) = 0;
    /* What the reads of the FAIL words have said about `peer` (any thread; telemetry/device_flows.h): *clear_ns, the
     * time (now_ns) at which the latest read that found its FAIL word unwritten started (0: no such read yet);
     * *failed, whether a read found it written or a low-latency kernel reported it. A peer writes FAIL before
     * it releases this rank's waits, so a transfer whose note was seen before *clear_ns moved data. */
    virtual void fail_state(int peer, uint64_t* clear_ns, bool* failed) const = 0;
    /* The GPU this rank's flags and mappings live on (-1: none). */
    virtual int device() const = 0;

    /* At destroy: a stream of this rank may still wait on a READY, DONE, FULL or FREE that a peer will never
     * write (the peer failed after the descriptors were exchanged, or died). Waits up to `wait_ms` for the
     * enqueued waits to be satisfied (0, as vcclCommAbort passes: DONE and FULL waits not at all, READY and
     * FREE waits 500 ms, since releasing one lets this rank's copy land in the peer's memory early), then satisfies the rest by
     * writing this rank's own flags from private streams, so no stream stays blocked on a communicator that
     * is gone; the data of those transfers is not valid. Returns how many flag writes it enqueued; logs what
     * it did. When a write does not land within a second, the flags and mappings stay allocated (freeing
     * them would wait for the blocked stream). */
    virtual int release_waits(int64_t wait_ms) = 0;

    /* Low-latency collectives (device/kernels/ll_collectives.h): the largest message a rank sends each peer, 0 when they
     * are off or not possible (not every rank of the communicator on this host and mapped,
     * VCCL_ALLREDUCE_LL_BYTES differs); equal on every rank. */
    virtual size_t ll_bytes() const = 0;
    /* Chunked collectives (device/kernels/chunked_collectives.h), in the same word sets: whether they are possible (the
     * low-latency collectives are on and a set holds at least two chunks); equal on every rank. */
    virtual bool chunked_possible() const = 0;
    /* Sequence number and pointers of the next low-latency collective; max_blocks is the GPU's multiprocessor
     * count (blocks that spin must all be resident), which the caller may lower. */
    virtual void ll_next(LlArgs* args) = 0;
    /* The call that ll_next described will not launch (a host-side failure): its peers are told through their
     * header words, so their kernels report a mismatch instead of waiting or pairing with a later call. The
     * words are written on `stream`, the call's own, after this rank's earlier work there (see the .cc). */
    virtual void ll_abandon(const LlArgs& args, void* stream) = 0;
    /* The call that ll_next described was enqueued: destroy waits for its kernel (kLlDone), not for a later
     * number that was given up and will never run. */
    virtual void ll_launched(const LlArgs& args) = 0;
    /* A low-latency collective being captured into a CUDA graph (device/kernels/ll_collectives.h): its arguments, on
     * the graph's word sets and counter; false when the low-latency collectives are off. *keep is what the graph
     * must hold while it lives: the words, the control words and the mappings of the peers' words, which this
     * object leaves to the last holder when it goes first (a replay after destroy then finds the abort word set and
     * does nothing). Dropping the last reference may happen where CUDA may not be called (a graph's destructor
     * callback): the memory is freed on a thread of its own. */
    virtual bool ll_graph_args(LlArgs* args, std::shared_ptr<void>* keep) = 0;
    /* Revoke: low-latency kernels waiting for a peer give up, and so does every graph replay from now on (captured
     * send/recv through graph_release.h; abort does the same in release_waits). */
    virtual void abort_kernels() = 0;

    /* Flow telemetry of the device path (telemetry/device_flows.h): note_words() 32-bit words in pinned host
     * memory that this rank's streams write when transfers are done (0 when there are none). note() has
     * `stream` write `value` into word `word` after everything enqueued on it so far, together with the
     * stream's next memory operation (at the latest at flush(), so one that rides with a transfer's own flag
     * write costs no driver call of its own); note_value() reads a word (any thread). */
    virtual int note_words() const = 0;
    virtual void note(int word, uint32_t value, void* stream) = 0;
    virtual uint32_t note_value(int word) const = 0;
};

} // namespace vccl

#endif
