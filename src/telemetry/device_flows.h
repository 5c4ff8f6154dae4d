/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Flow telemetry of the device path (telemetry::kDevicePath): the transfers between GPUs of one host that never
 * touch the host transport: copy-engine transfers into a peer's buffer, the staging FIFO, and the low-latency and
 * chunked kernels. Without this, telemetry saw nothing of a job whose GPUs share a host.
 *
 * A transfer is posted when the host enqueues it. It is done when its stream has written the transfer's note
 * (IpcP2p::note, a word in pinned host memory) and a poll reads that word: at the start of the communicator's next
 * call (run_comm_ops, once no staged job runs), from the idle-progress thread (about every millisecond while the
 * communicator is idle), and before vcclCommGetTelemetry's snapshot. A completion time is therefore late by up to the poll's delay, and the
 * bandwidth of a window is a lower bound when the host polls seldom.
 *
 * What is timed: one collective (or point-to-point transfer per path and direction) in VCCL_TELEMETRY_SAMPLE, at
 * every size; the host transport also times every transfer of 4 MiB and more, but here a note costs the stream a
 * write to host memory: timing every large transfer made 256 KiB-16 MiB send/recv 4-24% slower on 2x H200
 * (docs/PERFORMANCE.md, "Telemetry cost").
 * A direct transfer's note rides with its own flag write or wait (no driver call of its own); a kernel call's or a
 * FIFO transfer's costs a driver call (about 1.5 us). What is not timed is counted when posted and completed at
 * once, as are FIFO receives into host memory (their stream is not the call's other device work's, and the call
 * waits for it anyway).
 *
 * So the time of a device-path record runs from the host's enqueue to the poll that saw it done: it includes time
 * queued behind earlier work on the stream and the poll's delay, and the bandwidth it gives is a lower bound.
 * vccl-telemetry report therefore lists device-path links without calling them slow.
 *
 * Note words: 2 * peer (sends to the peer), 2 * peer + 1 (receives from it), 2 * nranks (kernel calls). A word
 * holds the number of the last transfer noted there; numbers grow by one per timed transfer on that word, and a
 * communicator's device work runs in call order, so every record up to the word's number is done. A record whose
 * note never comes (its stream blocked by a failed peer) stays outstanding, which is what it is.
 *
 * A note seen is not yet data moved. A peer that gave up its transfers with this rank releases this rank's waits
 * without data, and the streams go on and write the notes. The release cannot be told from a completion on the
 * device, but the peer writes its FAIL word in this rank's flags before it releases anything. So a record seen
 * done waits (still outstanding) until a read of the FAIL words that started after it was seen has landed
 * (IpcP2p::fail_state): the peer's word unwritten, the record moved data, with the time it was seen; written (or a
 * low-latency kernel that reported the peer), it is recorded as failed. Those reads come with the calls that have
 * device work (at most one per 10 ms, comm_poll_peer_failure), before vcclCommGetTelemetry's snapshot and at
 * destroy (failed_peer_now): a record is confirmed about 10-20 ms after its note while the rank calls, and at once
 * for a snapshot. Not from the idle-progress thread: CUDA calls there could race the runtime's teardown at exit,
 * so a record seen while the communicator is idle stays outstanding until its next call or snapshot. One that
 * had truly finished before the peer gave up but was seen after the last clean read is counted failed too. Not
 * covered: records counted at once, not timed.
 *
 * Writer: the caller holds the communicator's operation lock and no staged job runs, as for the host transport;
 * peer_failed() from any thread.
 */
#ifndef VCCL_TELEMETRY_DEVICE_FLOWS_H_
#define VCCL_TELEMETRY_DEVICE_FLOWS_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <vector>

#include "telemetry/telemetry.h"

namespace vccl {

class DeviceFlows {
public:
    /* read_note(word): the value the streams last wrote into note word `word` (IpcP2p::note_value).
     * fail_state(peer, &clear_ns, &failed): IpcP2p::fail_state, any thread. */
    using FailState = std::function<void(int, uint64_t*, bool*)>;
    DeviceFlows(telemetry::Telemetry* telemetry, int nranks, std::function<uint32_t(int)> read_note,
                FailState fail_state);

    static int send_word(int peer) { return 2 * peer; }
    static int recv_word(int peer) { return 2 * peer + 1; }
    int kernel_word() const { return 2 * nranks_; }
    int words() const { return 2 * nranks_ + 1; }

    /* A transfer of `bytes` with `peer` in direction `dir`, enqueued on the device path. Returns the number
     * the stream must write into *word once the transfer is done (IpcP2p::note), or 0: not timed, already
     * counted as done, nothing to write. */
    uint32_t posted(int peer, telemetry::Dir dir, uint64_t bytes, int* word);
    /* A transfer counted, not timed (FIFO receives into host memory). */
    void counted(int peer, telemetry::Dir dir, uint64_t bytes);
    /* Who a kernel call's messages go between: every pair of ranks both ways (AllReduce, ReduceScatter,
     * AllGather, AlltoAll), the root to every other rank (Broadcast), every other rank to the root (Reduce). */
    enum class KernelFlow { EveryPeer, FromRoot, ToRoot };
    /* A kernel call of this rank (`rank`) whose message to or from a peer is `bytes`. Returns the number to write
     * into kernel_word(), or 0 as above. Allocates nothing (it runs on every small collective). */
    uint32_t kernel_posted(int rank, uint64_t bytes, KernelFlow flow, int root);
    /* The transfer(s) that posted() or kernel_posted() just returned `note` for on `word` will not be
     * enqueued, or their note could not be: recorded as failed. */
    void abandoned(int word, uint32_t note);

    /* Any thread: `peer` gave up transfers with this rank (the header says what follows). */
    void peer_failed(int peer);

    /* Moves every record whose note has been written to those seen done, and completes those a read of the FAIL
     * words has vouched for since. Returns whether records still wait for their notes (those seen done wait for a
     * read of the FAIL words, which polling alone does not bring). */
    bool poll();
    bool outstanding() const { return outstanding_ > 0; }
    /* Records seen done that wait for a read of the FAIL words. */
    bool unconfirmed() const { return unconfirmed_ > 0; }

    /* The collective the transfers posted from now on belong to (1 + CollType, and next_collective()), or
     * point-to-point ({0, 0}). */
    void set_tag(const telemetry::TransferTag& tag) { tag_ = tag; }
    /* Numbers of device collectives, with the top bit set: the host transport numbers its collectives from 0
     * (comm->coll_seq), and vccl-telemetry report pairs records by number. Equal on every rank (all ranks make
     * the same device collectives in the same order); sampling goes by the low bits. */
    uint64_t next_collective() { return kDeviceCollectiveBit | ++collectives_; }
    static constexpr uint64_t kDeviceCollectiveBit = uint64_t(1) << 63;
    /* vccl-perf --baseline telemetry-paused: nothing is posted while paused. */
    void set_paused(bool paused) { paused_ = paused; }

private:
    struct Pending {
        int peer;
        telemetry::Telemetry::PathW* path;
        telemetry::Dir dir;
        uint64_t bytes;
        uint64_t post_ns;
        uint32_t note;
        telemetry::TransferTag tag;
    };
    struct Seen {
        Pending r;
        uint64_t seen_ns; // core clock (now_ns), compared with IpcP2p::fail_state's
        uint64_t done_ns; // telemetry's clock, the completion time recorded
    };
    uint32_t next_note(int word);
    uint32_t record(int peer, telemetry::Dir dir, uint64_t bytes, int word, uint32_t note);
    void confirm(int peer);

    telemetry::Telemetry* telemetry_;
    int nranks_;
    std::function<uint32_t(int)> read_note_;
    FailState fail_state_;
    std::vector<telemetry::Telemetry::PathW*> paths_; // path 2 of each peer (NULL for this rank's own)
    std::vector<std::deque<Pending>> pending_; // per note word, in note order
    std::vector<std::deque<Seen>> seen_done_;  // per peer, in the order seen
    std::vector<uint32_t> last_note_;          // per note word: the last number handed out
    std::vector<uint32_t> seen_;               // per note word: the highest value read (a word never goes back)
    std::unique_ptr<std::atomic<bool>[]> failed_; // per peer: peer_failed() was called
    size_t outstanding_ = 0;  // pending and seen done
    size_t unconfirmed_ = 0;  // seen done
    telemetry::TransferTag tag_;
    uint64_t collectives_ = 0;
    bool paused_ = false;
};

} // namespace vccl

#endif // VCCL_TELEMETRY_DEVICE_FLOWS_H_
