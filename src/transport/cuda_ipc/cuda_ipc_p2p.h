/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The CUDA IPC implementation of IpcP2p (transport/cuda_ipc/ipc_p2p.h), private to transport/cuda_ipc/. Its member
 * functions live in one file per responsibility:
 *   setup.cc        the exported buffer's layout, allocation and the exchange with every rank at creation
 *   describe.cc     descriptors of this side's buffers, exports of receive buffers (CUDA IPC or VMM descriptors)
 *   mappings.cc     peers' receive buffers mapped here: cache, eviction, retirement of VMM views
 *   rendezvous.cc   READY / copy / DONE transfers
 *   fifo.cc         the staging FIFO: slots, FULL / FREE credits
 *   stream_ops.cc   flag writes batched with a stream's next memory operation, telemetry's note words
 *   kernel_words.cc the words the low-latency and chunked kernels share, their sequence numbers
 *   failure.cc      FAIL words: telling peers, reading them (throttled, polled, at once)
 *   release.cc      destroy and abort: waits still pending released, everything freed
 *
 * The exported buffer of a rank (flags_) holds, each region one uint32_t per rank:
 *   READY[r]  written by receiver r into its sender's flags        DONE[s]  by sender s into its receiver's
 *   FAIL[p]   by a rank p that gave up a transfer with the owner   FULL[s]  by FIFO sender s into its receiver's
 *   FREE[r]   by FIFO receiver r into its sender's flags
 * then the graph words, kGraphSlots per rank of this host and kind:
 *   GREADY[r][k] written by receiver r into its sender's flags      GDONE[s][k] by sender s into its receiver's
 * then (4 KiB aligned) the FIFO slots, one row of VCCL_P2P_FIFO_SLOTS per sending rank of this host, then the
 * low-latency word sets, two per sending rank.
 */
#ifndef VCCL_TRANSPORT_CUDA_IPC_CUDA_IPC_P2P_H_
#define VCCL_TRANSPORT_CUDA_IPC_CUDA_IPC_P2P_H_

#include "config.h"

#if VCCL_HAVE_CUDA

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "device/driver_api.h"
#include "transport/cuda_ipc/fd_channel.h"
#include "transport/cuda_ipc/fifo_credits.h"
#include "transport/cuda_ipc/graph_release.h"
#include "transport/cuda_ipc/ipc_handles.h"
#include "transport/cuda_ipc/ipc_p2p.h"

namespace vccl {

class CudaIpcP2p final : public IpcP2p {
public:
    explicit CudaIpcP2p(const void* test_key) : test_key_(test_key) {}
    ~CudaIpcP2p() override; // release.cc
    vcclResult_t init(Bootstrap* bootstrap, const std::vector<uint64_t>& host_ids); // setup.cc

    bool reachable(int peer) const override { return peer >= 0 && size_t(peer) < reach_.size() && reach_[peer]; }
    bool everyone_reachable() const override { return everyone_reachable_; }
    int device() const override { return device_; }

    // describe.cc
    void describe(int peer, const void* buf, size_t bytes, bool is_recv, const Registration* reg,
                  P2pDescriptor* out) override;
    bool export_buffer(const void* buf, size_t bytes, Registration* r) override;

    // rendezvous.cc
    vcclResult_t post_recv_ready(int peer, void* stream, uint32_t* seq) override;
    vcclResult_t post_send(int peer, const void* buf, const P2pDescriptor& desc, void* stream, bool wait_ready) override;
    vcclResult_t post_recv_wait(int peer, uint32_t seq, void* stream, int note_word, uint32_t note_value) override;
    void abandon_send(int peer, void* stream) override { notify_abandoned(peer, true, kDone, ++send_seq_[peer], stream); }
    void abandon_recv(int peer) override {
        ++recv_seq_[peer]; // in step with the sender's count, though its READY never comes
        notify_abandoned(peer, false, kFail, 0);
    }

    // graph_p2p.cc
    bool graph_slots(int peer, bool send, uint32_t count, uint32_t* first) override;
    vcclResult_t post_graph_recv_ready(int peer, uint32_t slot, void* stream) override;
    vcclResult_t post_graph_send(int peer, uint32_t slot, const void* buf, const P2pDescriptor& recv_desc,
                                 void* stream) override;
    vcclResult_t post_graph_recv_wait(int peer, uint32_t slot, void* stream) override;
    std::shared_ptr<void> graph_keep() override;
    bool graphs_hold_transfers() const override;

    // fifo.cc
    size_t fifo_bytes(int peer) const override {
        return peer >= 0 && size_t(peer) < fifo_ok_.size() && fifo_ok_[peer] ? fifo_slot_bytes_ : 0;
    }
    vcclResult_t post_fifo_send(int peer, const void* buf, size_t bytes, void* stream) override;
    vcclResult_t post_fifo_recv(int peer, void* buf, size_t bytes, bool to_host, void* stream) override;
    void abandon_fifo_send(int peer, void* stream) override {
        notify_abandoned(peer, true, kFull, uint32_t(++fifo_sent_[peer]), stream);
    }
    void abandon_fifo_recv(int peer) override {
        ++fifo_recvd_[peer];
        notify_abandoned(peer, false, kFail, 0);
    }

    // stream_ops.cc
    vcclResult_t flush() override;
    int note_words() const override { return notes_count_; }
    void note(int word, uint32_t value, void* stream) override {
        if (word < 0 || word >= notes_count_) return;
        defer_write(static_cast<CUstream>(stream), note_addr(word), value, -1, false, kFail, 0);
    }
    uint32_t note_value(int word) const override {
        if (word < 0 || word >= notes_count_) return 0;
        return __atomic_load_n(&notes_host_[word], __ATOMIC_ACQUIRE);
    }

    // kernel_words.cc
    size_t ll_bytes() const override { return ll_active_ ? ll_message_bytes_ : 0; }
    bool chunked_possible() const override { return ll_active_ && chunk_layout_.slots >= 2; }
    void ll_next(LlArgs* a) override;
    void ll_launched(const LlArgs& a) override { ll_launched_seq_ = a.seq; }
    void ll_abandon(const LlArgs& a, void* stream) override;
    bool ll_graph_args(LlArgs* a, std::shared_ptr<void>* keep) override;
    void abort_kernels() override {
        if (ll_control_ != nullptr) ll_control_[kLlAbort] = 1;
        release_graph_waits();
    }

    // failure.cc
    void report_failure(int peer) override { tell_failed(peer, kFail, 0); }
    int failed_peer() override { return or_ll_mismatch(read_fail_words(true, 100)); }
    int failed_peer_polled() override { return or_ll_mismatch(poll_fail_words()); }
    int failed_peer_now(int64_t wait_ms) override { return or_ll_mismatch(read_fail_words(false, wait_ms)); }
    void fail_state(int peer, uint64_t* clear_ns, bool* failed) const override;

    // release.cc
    int release_waits(int64_t wait_ms) override;

private:
    // ---- The exported buffer (setup.cc) ----
    enum Region { kReady = 0, kDone = 1, kFail = 2, kFull = 3, kFree = 4 };
    static constexpr size_t kRegions = 5;
    static constexpr int64_t kMaxMappingsLimit = 65536;
    static constexpr size_t kMaxFifoSlotBytes = 4u << 20;
    static constexpr int64_t kMaxFifoSlots = 64;
    static constexpr size_t kIpcBlock = size_t(2) << 20; // granularity of CUDA IPC mappings of cudaMalloc memory

    /* What every rank publishes at creation. */
    struct PeerInfo {
        uint32_t ok; // flags exported
        int32_t device;
        uint32_t fifo_slots;      // staging FIFO geometry (0: none); a FIFO is used only between equal ones
        uint32_t fifo_slot_bytes;
        uint32_t ll_bytes;        // low-latency collectives (0: none); used only when equal on every rank,
        uint32_t ll_offset;       // and so is where its words start (after the FIFO slots, whose size may differ)
        char uuid[16];            // of the GPU: ranks sharing one take turns, which the low-latency kernel cannot
        char handle[64];
        uint64_t fd_name;         // descriptor socket (transport/cuda_ipc/fd_channel.h) for VMM buffers; 0: none
        uint64_t fd_secret;
        int64_t pid;              // with the host id, names the exporter of its handles (ipc_handles.h)
    };
    /* init's steps: the settings and the layout of the exported buffer; allocating it and this rank's side
     * of the telemetry notes and the descriptor socket (`mine` filled for the exchange); the exchange, the
     * peers' flags mapped and who reaches whom. */
    void init_layout(const std::vector<uint64_t>& host_ids, size_t* fifo_total, size_t* ll_total);
    void init_allocate(size_t fifo_total, size_t ll_total, PeerInfo* mine);
    vcclResult_t init_exchange(Bootstrap* bootstrap, const std::vector<uint64_t>& host_ids,
                               std::vector<PeerInfo>* infos);
    void init_reach(const std::vector<PeerInfo>& infos, const std::vector<uint8_t>& opened);

    /* Bytes of the flag regions and the graph words, before the FIFO slots. */
    size_t flag_region_bytes() const {
        return (kRegions * size_t(nranks_) + kGraphKinds * nlocal_ * kGraphSlots) * sizeof(uint32_t);
    }
    /* Address of graph word `slot` of kind `kind` for rank `index` (of this host: words by local index, so they grow
     * with the ranks of a host, not of the communicator) in `owner`'s flag buffer (as mapped here). */
    enum GraphKind { kGraphReady = 0, kGraphDone = 1 };
    static constexpr size_t kGraphKinds = 2;
    CUdeviceptr graph_addr(int owner, GraphKind kind, int index, uint32_t slot) const {
        return reinterpret_cast<CUdeviceptr>(peer_flags_[owner] + kRegions * size_t(nranks_) +
                                             (size_t(kind) * nlocal_ + size_t(local_index_[size_t(index)])) *
                                                 kGraphSlots + slot);
    }
    /* Address of flag `index` in `region` of `owner`'s flag buffer (as mapped here). */
    CUdeviceptr flag_addr(int owner, Region region, int index) const {
        return reinterpret_cast<CUdeviceptr>(peer_flags_[owner] + size_t(region) * nranks_ + index);
    }

    int rank_ = 0;
    int nranks_ = 0;
    int device_ = -1;
    uint32_t* flags_ = nullptr;            // this rank's exported buffer: the flag regions, slots, word sets
    std::vector<uint32_t*> peer_flags_;    // every reachable rank's buffer mapped here (own at rank_)
    std::vector<bool> reach_;
    bool everyone_reachable_ = false;
    const void* test_key_ = nullptr;       // the communicator, for the test points (core/test_point.h)

    // ---- Descriptors and peers' buffers (describe.cc, mappings.cc) ----
    /* A VMM buffer's file descriptor is in this rank's socket queue before its descriptor message arrives;
     * the wait only covers a scheduling hiccup. */
    static constexpr int kFdWaitMs = 1000;
    static constexpr size_t kMaxOffers = 1024;
    /* The export part of a receive buffer's descriptor; a VMM allocation's file descriptor goes to `peer`
     * first, and when it cannot the transfer is staged (no kDescIpc). */
    void describe_export(int peer, const void* buf, const Registration& r, P2pDescriptor* out);

    struct Mapping {
        char handle[64];
        void* ptr;
        uint64_t last_use;
        uint64_t alloc_base; // in the exporting process
        uint64_t alloc_size;
        size_t vmm_size;     // a VMM allocation's mapping (vmm::unmap); 0: a CUDA IPC mapping
        ipc_handles::Ref ipc; // the CUDA IPC mapping, shared with the process's other communicators
    };
    static void unmap(const Mapping& m);
    /* A CUDA IPC mapping closed to make room for another communicator's handle (ipc_handles.h). */
    static bool closed_elsewhere(const Mapping& m) { return m.vmm_size == 0 && m.ipc && !m.ipc->open.load(); }
    /* VMM mappings let go of while copies into them may still be queued: cuMemUnmap does not wait for them
     * (cudaIpcCloseMemHandle does). Such a mapping waits in retiring_ until the batch ends (flush), when an
     * event is recorded on every stream of the batch; it is unmapped once those have completed (reap_retired,
     * at the next map and at destroy). That covers its copies: those of this batch are on its streams, and
     * earlier calls' work is ordered before them (StreamOrder). Streams of earlier calls are not used: the
     * caller may have destroyed them. */
    struct View {
        void* ptr;
        size_t size;
    };
    struct Retired { // the views dropped in one batch, and an event per stream of that batch
        std::vector<View> views;
        std::vector<cudaEvent_t> events;
    };
    void retire_batch();
    void reap_retired();
    /* Lets go of a mapping of `peer`'s memory; a VMM one's exporter is told, so it sends the descriptors
     * again if the buffer is used again. */
    void drop(int peer, const Mapping& m);
    /* Unmaps and forgets every mapping of `peer`'s memory that `pred` selects. */
    template <typename Pred> void close_mappings_if(int peer, Pred pred) {
        std::vector<Mapping>& list = mappings_[peer];
        for (size_t i = 0; i < list.size();) {
            if (pred(list[i])) {
                drop(peer, list[i]);
                list.erase(list.begin() + long(i));
            } else {
                ++i;
            }
        }
    }
    /* The receiver's buffer allocation mapped into this process, opened once and kept (bounded). *ipc: its
     * CUDA IPC mapping, which the caller checks is still open under ipc_handles::UseLock (empty for VMM memory
     * and for the rank itself). */
    vcclResult_t map(int peer, const P2pDescriptor& desc, void* stream, void** base, ipc_handles::Ref* ipc);
    /* A VMM buffer's mapping, from the file descriptors that came over the descriptor socket (map's VMM part). */
    vcclResult_t map_vmm(int peer, const P2pDescriptor& desc, std::vector<Mapping>& list, void** base);
    /* Whether a descriptor's handle (flags: its kDesc* bits) names a span of another allocator's VMM memory. */
    static bool is_span(const char* handle, uint32_t flags);
    void remember(std::vector<Mapping>& list, const P2pDescriptor& desc, void* ptr, size_t vmm_size,
                  ipc_handles::Ref ipc);

    std::vector<std::vector<Mapping>> mappings_;
    std::vector<ipc_handles::Exporter> exporters_; // per rank: the process its handles come from
    std::vector<View> retiring_;       // dropped in the current batch
    std::vector<Retired> retired_;     // waiting for their events
    std::vector<void*> batch_streams_; // streams that direct copies were enqueued on since the last flush
    uint64_t clock_ = 0;
    FdChannel fds_;               // VMM buffers' file descriptors to and from the ranks of this host
    size_t max_mappings_ = 64;    // VCCL_P2P_MAX_MAPPINGS
    uint64_t evictions_ = 0;      // mappings let go to make room (a CUDA IPC one waited for the device)

    // ---- Rendezvous transfers (rendezvous.cc) ----
    std::vector<uint32_t> send_seq_, recv_seq_; // direct sends per peer (their READY numbers); READY writes per peer
    std::vector<uint32_t> ready_waited_;        // the last READY wait enqueued per peer (some sends enqueue none)
    std::vector<uint32_t> done_waited_;         // the last DONE wait enqueued per peer

    // ---- Captured transfers (graph_p2p.cc) ----
    std::vector<uint32_t> graph_sends_, graph_recvs_; // slots handed out per peer
    std::vector<ipc_handles::Ref> graph_holds_;        // mappings the batch being captured copies into (graph_keep)

    // ---- The staging FIFO (fifo.cc) ----
    /* Slot of FIFO transfer n from `sender` in `owner`'s buffer (as mapped here). */
    void* slot(int owner, int sender, uint64_t n) const {
        size_t index = size_t(local_index_[sender]) * fifo_slots_ + size_t((n - 1) % fifo_slots_);
        return reinterpret_cast<char*>(peer_flags_[owner]) + slots_offset_ + index * fifo_slot_stride_;
    }
    // Geometry (equal on every rank it is used with), where the slots start in a rank's buffer, each rank's
    // index among the ranks of its host (its slots' row), and per peer the transfers sent and received and the
    // last FREE (credit) and FULL waits enqueued.
    size_t fifo_slots_ = 0, fifo_slot_bytes_ = 0, fifo_slot_stride_ = 0, slots_offset_ = 0;
    FifoCredits credits_; // when to wait for and publish FREE (transport/cuda_ipc/fifo_credits.h)
    std::vector<int> local_index_;
    size_t nlocal_ = 0; // ranks on this host
    std::vector<bool> fifo_ok_;
    std::vector<uint64_t> fifo_sent_, fifo_recvd_;
    std::vector<uint32_t> fifo_credit_waited_, fifo_full_waited_;

    // ---- Stream memory operations (stream_ops.cc) ----
    /* Flag writes of the direct path wait here for the stream's next memory operation, so that each pair
     * costs one driver call (about 1.8 us against 3 for two on the H100 host). A write that cannot be
     * enqueued gives its transfer up as the immediate write did (notify_abandoned with `release`). */
    struct PendingWrite {
        CUstream stream;
        CUdeviceptr addr;
        uint32_t value;
        int peer;
        bool send;
        Region release;
        uint32_t release_seq;
    };
    void defer_write(CUstream stream, CUdeviceptr addr, uint32_t value, int peer, bool send, Region release,
                     uint32_t release_seq) {
        pending_.push_back(PendingWrite{stream, addr, value, peer, send, release, release_seq});
    }
    static CUstreamBatchMemOpParams wait_op(CUdeviceptr addr, uint32_t value);
    static CUstreamBatchMemOpParams write_op(CUdeviceptr addr, uint32_t value);
    CUresult issue_pending(CUstream stream, const CUstreamBatchMemOpParams& op) { return issue_pending(stream, &op, 1); }
    CUresult issue_pending(CUstream stream, std::nullptr_t) { return issue_pending(stream, nullptr, 0); }
    /* Enqueues the pending writes of `stream` and then ops[0..count) on it. */
    CUresult issue_pending(CUstream stream, const CUstreamBatchMemOpParams* ops, size_t count);
    CUdeviceptr note_addr(int word) const { return notes_dev_ + CUdeviceptr(word) * sizeof(uint32_t); }

    std::vector<PendingWrite> pending_;
    /* Telemetry's note words (note()): pinned host memory the streams write through its device address. */
    uint32_t* notes_host_ = nullptr;
    CUdeviceptr notes_dev_ = 0;
    int notes_count_ = 0;

    // ---- Kernel words (kernel_words.cc) ----
    /* The words `sender` writes for set `set` in the buffer of its receiver at `base` (as mapped here). */
    uint64_t* ll_words(uint32_t* base, int sender, size_t set) const {
        return reinterpret_cast<uint64_t*>(reinterpret_cast<char*>(base) + ll_offset_) +
               (size_t(sender) * 2 + set) * ll_set_words_;
    }
    /* The same for the graphs' sets (ll_collectives.h), after every sender's two eager sets. */
    uint64_t* ll_graph_words(uint32_t* base, int sender, size_t set) const {
        return ll_words(base, nranks_, 0) + (size_t(sender) * 2 + set) * ll_set_words_;
    }
    /* What ll_next and ll_graph_args share: the ranks, the control words, the arrivals word and every peer's words of
     * set `set` (eager or graph). */
    void ll_fill(LlArgs* a, bool graph, size_t set) const;
    /* A peer a low-latency kernel found mismatched (it takes precedence), else `who`. */
    int or_ll_mismatch(int who) const {
        return ll_control_ != nullptr && ll_control_[kLlMismatch] != 0 ? ll_control_[kLlMismatch] - 1 : who;
    }
    // Words per (sender, set) and where they start in a rank's buffer; whether every rank can take part; calls
    // made; the control words the kernel shares with the host (abort, mismatch).
    size_t ll_bytes_ = 0, ll_message_bytes_ = 0, ll_set_words_ = 0, ll_offset_ = 0;
    ChunkLayout chunk_layout_; // the chunked collectives' view of a set (from ll_set_words_)
    bool ll_active_ = false;
    uint64_t ll_calls_ = 0;
    uint32_t ll_launched_seq_ = 0; // number of the last call whose kernel was enqueued (0: none)
    int sm_count_ = 1;             // the GPU's multiprocessors: the most blocks a low-latency kernel takes
    volatile int* ll_control_ = nullptr;
    /* What graphs captured with ll_graph_args hold: made at the first capture, empty while this object lives; at
     * destroy, while a graph still holds it, it takes the words, the control words and the peers' mappings over, and
     * frees them when the last graph goes, on a thread of its own (the last reference goes in the graph's destructor
     * callback, where CUDA may not be called; release.cc). */
    struct GraphKeep {
        int device = -1;
        uint32_t* flags = nullptr;         // this rank's words (cudaMalloc)
        std::vector<uint32_t*> peer_flags; // the peers' words as mapped here (cudaIpcOpenMemHandle)
        volatile int* control = nullptr;   // the control words (cudaHostAlloc)
        std::shared_ptr<GraphWaitRelease> release; // after abort or revoke, while graphs hold send/recv
        bool release_tried = false;                // prepared once (a failure is not retried)
        // Graphs alive that hold captured send/recv (graph_p2p.cc): shared with them, as they may outlive this.
        std::shared_ptr<std::atomic<int>> p2p_graphs = std::make_shared<std::atomic<int>>(0);
        ~GraphKeep();
    };
    std::shared_ptr<GraphKeep> graph_keep_;
    /* Abort or revoke: replays of captured send/recv no longer wait for their peers (graph_release.h); graph_p2p.cc. */
    void release_graph_waits();

    // ---- FAIL words (failure.cc) ----
    static constexpr int kPrivateStreams = 4;
    /* failed_peer_polled: a read of the FAIL words on one of the private streams (into its part of
     * flags_host_), looked at by a later call; flags_mutex_ guards all but the time of the next poll. A read
     * stuck behind a blocked stream (a shared hardware queue) is left, and the next goes on another stream. */
    static constexpr uint64_t kFailPollNs = 10000000; // 10 ms
    /* This rank gave up a transfer with `peer` after the descriptors were exchanged: FAIL[rank_] in the
     * peer's flags says so (its vcclCommGetAsyncError reports it), and for a send DONE(seq) or FULL(seq)
     * (`release`; kFail: nothing) lets the peer's receiving stream go on, with data that is not valid,
     * instead of waiting for ever. A receive's READY or FREE is not faked: that would let the peer's copy
     * land in memory the caller was told failed. The release goes on `stream` after this rank's earlier work
     * there (pending writes first), so the peer's waits pass in order and only after the data of earlier
     * transfers landed; on a private stream when there is none or it refuses (the caller's may be what failed),
     * as before: prompt, but not ordered. */
    void notify_abandoned(int peer, bool send, Region release, uint32_t seq, void* stream = nullptr);
    /* Writes FAIL (and `release` = seq unless kFail) into the peer's flags; false when it could not. */
    bool tell_failed(int peer, Region release, uint32_t seq, void* stream = nullptr);
    /* notify_stream_ (made now if needed), or nullptr when it cannot be made. */
    CUstream notify_stream();
    /* failed_peer() (`throttled`: at most one read per millisecond) and failed_peer_now(), without the low-latency
     * kernels' reports: the FAIL words are still read after one, so that fail_state goes on vouching for the
     * other peers' transfers (telemetry/device_flows.h). */
    int read_fail_words(bool throttled, int64_t wait_ms);
    int poll_fail_words(); // failed_peer_polled() likewise
    /* A read of the FAIL words (nranks_ of them) that started at `started_ns` has landed: records what it says
     * (fail_state); returns the first peer whose word was written, or -1. Under flags_mutex_. */
    int fail_words_landed(const uint32_t* fail, uint64_t started_ns);
    /* Creates the private streams not made yet; false when there is none. */
    bool private_streams();
    /* Reads flags_ on every idle private stream (each into its own copy) and returns the first copy that
     * lands, or nullptr on an error or at `deadline_ns`. A stream still busy with an earlier read (stuck
     * behind a blocked stream) is left alone. */
    const uint32_t* read_flags(uint64_t deadline_ns);

    /* Reading and releasing this rank's own flags: several streams, since one of them may share a hardware
     * queue with a blocked stream (CUDA_DEVICE_MAX_CONNECTIONS) and stay stuck behind it. Made on first use;
     * flags_mutex_ guards them and flags_host_ (failed_peer runs on any thread). */
    std::mutex flags_mutex_;
    cudaStream_t private_streams_[kPrivateStreams] = {};
    uint32_t* flags_host_ = nullptr; // pinned: one copy of flags_ per private stream (pageable would block)
    cudaStream_t notify_stream_ = nullptr; // notify_abandoned's and ll_abandon's, made on first use
    uint64_t last_fail_check_ns_ = 0;
    std::atomic<uint64_t> next_fail_poll_ns_{0};
    int fail_poll_stream_ = -1;       // private stream of the read in flight; -1: none
    uint64_t fail_poll_started_ns_ = 0;
    uint32_t abandoned_ = 0;         // transfers this rank gave up (the value written into peers' FAIL)
    /* fail_state, per peer (sized by init): when the latest landed read that found the peer's FAIL word unwritten
     * started, and whether a read found it written. Written under flags_mutex_. */
    std::unique_ptr<std::atomic<uint64_t>[]> fail_clear_ns_;
    std::unique_ptr<std::atomic<bool>[]> fail_seen_;

    // ---- Release at destroy and abort (release.cc) ----
    static constexpr int64_t kReadyGraceMs = 500; // release_waits: how long a peer may still post its READY
    int release_flag_waits(int64_t wait_ms); // release_waits without the low-latency kernels
    /* This rank's flag (region, p) as it should end: the last value a wait was enqueued for. */
    uint32_t expected(Region region, int peer) const;
    /* Releasing a wait on this region lets this rank's copy land in a peer's memory early (grace period). */
    static bool lets_copy_go(Region region) { return region == kReady || region == kFree; }
    /* Flags (region, peer) whose waits are not satisfied in `flags`. */
    std::vector<std::pair<Region, int>> unsatisfied(const uint32_t* flags) const;
    bool stream_blocked_ = false;    // release_waits could not release a wait: keep everything allocated
};

/* The stream memory operations and allocation queries of the direct path (device/driver_api.h). */
const DriverApi& driver();

} // namespace vccl

#endif // VCCL_HAVE_CUDA

#endif
