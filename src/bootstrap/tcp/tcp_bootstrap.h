/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The TCP bootstrap: ranks find each other through the root service named by a vcclUniqueId, then talk
 * over direct connections (one per ordered pair of ranks, opened on first use).
 *
 * Receiving: there is no background thread. A thread waiting in recv() (or blocked in send(), so that two
 * ranks sending large messages to each other cannot deadlock) takes the "poller" role: it accepts
 * connections and reads whatever arrived, parking messages by (source, tag) until their receiver asks.
 * Other waiting threads sleep on a condition variable meanwhile. Reads are nonblocking and resumable.
 */
#ifndef VCCL_BOOTSTRAP_TCP_TCP_BOOTSTRAP_H_
#define VCCL_BOOTSTRAP_TCP_TCP_BOOTSTRAP_H_

#include <atomic>
#include <condition_variable>
#include <string>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "bootstrap/bootstrap.h"
#include "bootstrap/tcp/socket_util.h"
#include "bootstrap/tcp/wire.h"
#include "vccl.h"

namespace vccl {

/* Creates a unique id for a new bootstrap and starts its root service in this process. */
vcclResult_t tcp_unique_id_create(vcclUniqueId* out);

/* Joins the bootstrap named by `id` as `rank` of `nranks` (collective over all ranks; bounded by
 * VCCL_BOOTSTRAP_TIMEOUT; gives up with vcclRemoteError once a flag of `cancel` is raised). */
vcclResult_t tcp_bootstrap_create(const vcclUniqueId& id, int rank, int nranks, std::shared_ptr<Bootstrap>* out,
                                  const CancelScope* cancel = nullptr);

class TcpBootstrap final : public Bootstrap {
public:
    TcpBootstrap(int rank, const uint8_t (&secret)[wire::kSecretBytes], std::vector<sock::SockAddr> peers,
                 sock::Fd listen_fd, const sock::SockAddr& listen_addr);
    ~TcpBootstrap() override;

    int rank() const override { return rank_; }
    int nranks() const override { return int(peers_.size()); }
    vcclResult_t send(int peer, uint64_t tag, const void* data, size_t bytes) override;
    vcclResult_t recv(int peer, uint64_t tag, void* data, size_t bytes) override;
    vcclResult_t send_cancellable(int peer, uint64_t tag, const void* data, size_t bytes,
                                  const CancelScope* cancel) override;
    vcclResult_t recv_cancellable(int peer, uint64_t tag, void* data, size_t bytes, const CancelScope* cancel) override;
    void abort() override;

    /* Where this rank accepts peer connections (tests). */
    const sock::SockAddr& listen_address() const { return listen_addr_; }

private:
    /* An accepted connection: first its preamble, then a stream of header + payload messages. */
    struct Incoming {
        sock::Fd fd;
        std::string from;
        int src = -1; // -1 until the preamble authenticated it
        uint8_t head[32];
        size_t head_got = 0;
        std::vector<uint8_t> payload;
        size_t payload_got = 0;
        uint64_t tag = 0;
        bool in_payload = false;
    };
    /* The connection this rank writes to one peer; mutex keeps each message's header and payload together. */
    struct Outgoing {
        std::mutex mutex;
        sock::Fd fd;
        bool broken = false; // a failed write left the stream mid-message: never write to it again
    };

    /* One round as the poller: waits up to wait_ms for incoming data, then reads all that is there. */
    vcclResult_t progress(int wait_ms);
    /* Runs progress() if no other thread is the poller, else just sleeps up to wait_ms. */
    vcclResult_t progress_or_wait(int wait_ms, int fd_out);
    void accept_all();
    /* Reads what fd has; returns false when the connection is finished with (closed or rejected). */
    bool advance(Incoming& in);
    bool check_preamble(Incoming& in);
    void deliver(int src, uint64_t tag, std::vector<uint8_t>&& payload);
    /* Writes all of data to out.fd, making incoming progress while the socket is full. */
    vcclResult_t write_message(Outgoing& out, const void* data, size_t bytes, const Deadline& deadline,
                               const CancelScope* cancel, const char* what);
    bool cancelled(const CancelScope* cancel) const {
        return aborted_.load(std::memory_order_acquire) || CancelScope::cancelled(cancel);
    }

    const int rank_;
    uint8_t secret_[wire::kSecretBytes];
    const std::vector<sock::SockAddr> peers_;
    sock::Fd listen_fd_;
    const sock::SockAddr listen_addr_;
    std::atomic<bool> aborted_{false};
    std::vector<std::unique_ptr<Outgoing>> out_;

    std::mutex mutex_; // guards stash_ and poller_active_
    std::condition_variable cv_;
    bool poller_active_ = false;
    std::map<std::pair<int, uint64_t>, std::deque<std::vector<uint8_t>>> stash_;
    std::vector<std::unique_ptr<Incoming>> in_; // touched only by the thread holding the poller role
};

} // namespace vccl

#endif
