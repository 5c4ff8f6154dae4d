/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Passing file descriptors between the ranks of one host. CUDA VMM memory (vcclMemAlloc's, and other
 * allocators': device/vmm.h) is shared with another process as POSIX file descriptors, which, unlike a
 * cudaIpcMemHandle_t, cannot travel as bytes in a message: they go over a Unix datagram socket (SCM_RIGHTS),
 * one per communicator and rank, in the abstract namespace (no file to clean up after a crash).
 *
 * No thread serves the socket. The exporting rank offers a descriptor before the message that refers to it,
 * and a datagram is in the receiver's queue when sendmsg returns, so the importer finds it by draining its
 * own queue when it needs it. Each descriptor is offered to a peer once: the importer keeps what it imported
 * and, when it lets go of it (or never took it), says so with a "forget" datagram, after which the exporter
 * offers it again on its next use. Both sides drain before they act, and every datagram a rank sends goes
 * out before its next message to that peer over the transport, so an exporter always sees a forget before
 * the transfer that needs the descriptor again.
 *
 * A datagram is accepted only when it carries the secret the claimed rank published over the bootstrap
 * (socket names are visible to every local user in /proc/net/unix, secrets are not) and its kernel-checked
 * sender credentials (SO_PASSCRED) name this process's uid: no other process can slip a descriptor in.
 * The abstract namespace belongs to a network namespace: ranks in different ones cannot reach each other
 * this way, and their transfers of VMM memory take the staged path.
 */
#ifndef VCCL_TRANSPORT_CUDA_IPC_FD_CHANNEL_H_
#define VCCL_TRANSPORT_CUDA_IPC_FD_CHANNEL_H_

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>


namespace vccl {

class FdChannel {
public:
    FdChannel();
    ~FdChannel(); // closes the socket and every descriptor received and not taken
    FdChannel(const FdChannel&) = delete;
    FdChannel& operator=(const FdChannel&) = delete;

    /* Binds this rank's socket under a fresh random name; false (with errno) when sockets are unavailable. */
    bool open(int rank);
    bool is_open() const { return sock_ >= 0; }

    /* What a peer needs to reach this socket and be believed: published over the bootstrap. */
    struct Address {
        uint64_t name = 0;   // of the socket (0: none, never reached or accepted)
        uint64_t secret = 0; // carried by every datagram this rank sends
    };
    Address address() const { return Address{name_, secret_}; }
    /* Per rank, what it published. */
    void set_peers(const std::vector<Address>& peers) { peers_ = peers; }

    /* Several descriptors that travel as one (a buffer made of several VMM allocations), each with a value
     * for the importer (there: the bytes it maps). At most kMaxFds. */
    struct FdSet {
        std::vector<int> fds;
        std::vector<uint64_t> values; // one per descriptor
        void close_all();             // closes every descriptor and empties the set
    };
    static constexpr size_t kMaxFds = 64;

    /* Exporter: makes sure `peer` holds the descriptor for `key`. Sends one from make_fd() (closed here) unless
     * it was sent before and not forgotten. Never blocks: false when it cannot be sent now (full queue, peer
     * unreachable, make_fd() < 0); the caller takes another path and the next offer tries again. */
    bool offer(int peer, uint64_t key, const std::function<int()>& make_fd);
    /* The same for a set of descriptors, made by make() (false: none; what it made is closed here). */
    bool offer_set(int peer, uint64_t key, const std::function<bool(FdSet*)>& make);
    /* Exporter: drops the record of sends whose key is no longer alive (freed allocations). */
    void prune_offers(const std::function<bool(uint64_t key)>& alive);
    size_t offers() const { return offered_.size(); }

    /* Importer: the descriptor `peer` sent with `key`, now owned by the caller; waits up to `wait_ms` for it.
     * -1 when it did not come (the reason in *why). */
    int take(int peer, uint64_t key, int wait_ms, std::string* why);
    /* The same for a set (offer_set; a single offer() arrives as a set of one with value 0). */
    bool take_set(int peer, uint64_t key, int wait_ms, FdSet* out, std::string* why);
    /* Importer: it let go of what it imported from `peer` for `key` (or failed to use it): the exporter is
     * told to send it again when it is next needed. Retried at the next call when the peer's queue is full. */
    void forget(int peer, uint64_t key);

    /* Sets received and not (yet) taken, at most kMaxKept per channel, and at most max_kept_fds() descriptors
     * kept by all channels of the process together; beyond that a channel holding more than its share of that
     * bound closes its oldest sets (all but its newest) and tells their senders to forget them (their
     * transfers, if they ever come, fail). The share keeps an idle channel's stale sets from making a busy
     * one close its own. A
     * set is normally taken within milliseconds, but one batch may bring many: a group of receives into
     * buffers of other allocators' VMM memory brings a set of up to kMaxFds descriptors per buffer. The only
     * sets never taken are those of transfers given up after their descriptors came. */
    size_t kept() const { return kept_.size(); }
    static constexpr size_t kMaxKept = 1024;
    /* A quarter of the process's descriptor limit (RLIMIT_NOFILE, as it was at the first call), within
     * 256..4096. */
    static size_t max_kept_fds();
    /* Datagrams dropped so far: wrong secret, uid or shape. */
    uint64_t rejected() const { return rejected_; }

private:
    /* Reads every queued datagram (descriptors into kept_, forgets out of offered_) and resends forgets that
     * did not go out; false on a socket error. */
    bool drain();
    bool send_datagram(int peer, uint32_t kind, uint64_t key, const FdSet* set);
    static std::string socket_path(uint64_t name);

    int rank_ = -1;
    int sock_ = -1;
    uint64_t name_ = 0, secret_ = 0;
    std::vector<Address> peers_;
    std::map<std::pair<int, uint64_t>, std::pair<uint64_t, FdSet>> kept_; // (peer, key) -> (arrival, set)
    size_t kept_fds_ = 0; // descriptors in kept_ (also counted process-wide: count_kept)
    void count_kept(size_t added, size_t removed);
    uint64_t arrivals_ = 0;
    std::set<std::pair<int, uint64_t>> offered_;              // (peer, key) sent and not forgotten
    std::vector<std::pair<int, uint64_t>> unsent_forgets_;    // (peer, key)
    uint64_t rejected_ = 0;
};

} // namespace vccl

#endif
