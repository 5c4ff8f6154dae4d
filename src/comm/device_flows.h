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
 * write to host memory: timing every large transfer made 256 KiB-16 MiB send/recv 4-24% slower on 2x H200 (run190).
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
 * note never comes (its stream blocked by a failed peer) stays outstanding, which is what it is. A peer that gave up
 * its transfers with this rank releases this rank's waits without data: the streams go on and write the notes. Once
 * the failure is known here (comm_note_failed_peer: the next call's or vcclCommGetAsyncError's look at the FAIL
 * words), that peer's timed records seen done are recorded as failed, not as data moved (one that had truly finished
 * but was not polled yet is counted failed too). Not caught: records a poll saw done before the failure was known,
 * which the idle-progress thread's polls (about every millisecond) make the common case, and records counted at
 * once, not timed. Telling a released wait from a completed one on the device would need the release to write a
 * value of its own, which it does not.
 *
 * Writer: the caller holds the communicator's operation lock and no staged job runs, as for the host transport;
 * peer_failed() from any thread.
 */
#ifndef VCCL_COMM_DEVICE_FLOWS_H_
#define VCCL_COMM_DEVICE_FLOWS_H_

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
    /* read_note(word): the value the streams last wrote into note word `word` (IpcP2p::note_value). */
    DeviceFlows(telemetry::Telemetry* telemetry, int nranks, std::function<uint32_t(int)> read_note);

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

    /* Completes every record whose note has been written. Returns whether records are still outstanding. */
    bool poll();
    bool outstanding() const { return outstanding_ > 0; }

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
    uint32_t next_note(int word);
    uint32_t record(int peer, telemetry::Dir dir, uint64_t bytes, int word, uint32_t note);

    telemetry::Telemetry* telemetry_;
    int nranks_;
    std::function<uint32_t(int)> read_note_;
    std::vector<telemetry::Telemetry::PathW*> paths_; // path 2 of each peer (NULL for this rank's own)
    std::vector<std::deque<Pending>> pending_; // per note word, in note order
    std::vector<uint32_t> last_note_;          // per note word: the last number handed out
    std::vector<uint32_t> seen_;               // per note word: the highest value read (a word never goes back)
    std::unique_ptr<std::atomic<bool>[]> failed_; // per peer: peer_failed() was called
    size_t outstanding_ = 0;
    telemetry::TransferTag tag_;
    uint64_t collectives_ = 0;
    bool paused_ = false;
};

} // namespace vccl

#endif // VCCL_COMM_DEVICE_FLOWS_H_
