/* SPDX-License-Identifier: BSD-3-Clause */
#include "bootstrap/tcp/tcp_bootstrap.h"

#include <chrono>
#include <cerrno>
#include <cinttypes>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <string>

#include <poll.h>

#include "bootstrap/tcp/protocol.h"
#include "bootstrap/tcp/tcp_root.h"
#include "bootstrap/tcp/unique_id.h"
#include "core/log.h"
#include "core/status.h"

namespace vccl {

namespace {

/* printf into a std::string: the "what" of a wait, used in its error messages. */
std::string describe(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
std::string describe(const char* fmt, ...) {
    char buf[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    return buf;
}

vcclResult_t timeout_error(const std::string& what) {
    VCCL_WARN(kLogBootstrap, "%s: timed out after %d s", what.c_str(), bootstrap_timeout_s());
    return set_last_error(vcclTimeout, "%s: timed out after %d s (VCCL_BOOTSTRAP_TIMEOUT)", what.c_str(),
                          bootstrap_timeout_s());
}

vcclResult_t aborted_error(const std::string& what) {
    return set_last_error(vcclRemoteError, "%s: bootstrap aborted", what.c_str());
}

/* Registers with the root and returns the address table. */
vcclResult_t register_with_root(const uid::Info& id, int rank, int nranks, const sock::SockAddr& listen_addr,
                                const CancelScope* cancel, std::vector<sock::SockAddr>* table) {
    const Deadline deadline = bootstrap_deadline();
    const std::string root = id.root.to_string();
    std::string what = describe("rank %d of %d: connecting to the bootstrap root %s", rank, nranks, root.c_str());
    sock::Fd fd;
    VCCL_RETURN_IF_ERROR(sock::connect_to(id.root, deadline, cancel, what.c_str(), &fd));

    uint8_t hello[tcpproto::kHelloBytes];
    wire::Writer w(hello);
    w.u32(tcpproto::kHelloMagic);
    w.u32(tcpproto::kVersion);
    w.bytes(id.secret, wire::kSecretBytes);
    w.u32(uint32_t(rank));
    w.u32(uint32_t(nranks));
    w.addr(listen_addr);
    what = describe("rank %d of %d: registering with the bootstrap root %s", rank, nranks, root.c_str());
    VCCL_RETURN_IF_ERROR(sock::send_all(fd.get(), hello, sizeof(hello), deadline, cancel, what.c_str()));

    // The root answers when the last rank registered: this is where a rank waits for the slowest one.
    what = describe("rank %d of %d: waiting for the address table from the bootstrap root %s (all ranks must register)",
                    rank, nranks, root.c_str());
    uint8_t head[tcpproto::kReplyBytes];
    VCCL_RETURN_IF_ERROR(sock::recv_all(fd.get(), head, sizeof(head), deadline, cancel, what.c_str()));
    wire::Reader r(head);
    const uint32_t magic = r.u32(), status = r.u32(), root_nranks = r.u32(), registered = r.u32();
    if (magic != tcpproto::kTableMagic) {
        return set_last_error(vcclRemoteError, "rank %d of %d: the bootstrap root %s sent a malformed reply", rank, nranks,
                              root.c_str());
    }
    if (status == tcpproto::kRootTimedOut) {
        VCCL_WARN(kLogBootstrap, "rank %d of %d: bootstrap root %s gave up: %u of %u ranks registered", rank, nranks,
                  root.c_str(), registered, root_nranks);
        return set_last_error(vcclTimeout,
                              "rank %d of %d: the bootstrap root %s gave up after %d s (VCCL_BOOTSTRAP_TIMEOUT) with only "
                              "%u of %u ranks registered",
                              rank, nranks, root.c_str(), bootstrap_timeout_s(), registered, root_nranks);
    }
    if (status != tcpproto::kOk) {
        return set_last_error(vcclInvalidUsage, "rank %d of %d: the bootstrap root %s refused the registration: %s (root has nranks %u)",
                              rank, nranks, root.c_str(), tcpproto::root_status_text(status), root_nranks);
    }
    if (root_nranks != uint32_t(nranks)) {
        return set_last_error(vcclRemoteError, "rank %d of %d: the bootstrap root %s sent a table of %u ranks", rank, nranks,
                              root.c_str(), root_nranks);
    }
    std::vector<uint8_t> raw(size_t(nranks) * wire::kAddrBytes);
    VCCL_RETURN_IF_ERROR(sock::recv_all(fd.get(), raw.data(), raw.size(), deadline, cancel, what.c_str()));
    std::vector<sock::SockAddr> result(nranks);
    wire::Reader tr(raw.data());
    for (int i = 0; i < nranks; ++i) {
        if (!tr.addr(&result[i])) {
            return set_last_error(vcclRemoteError, "rank %d of %d: the bootstrap root %s sent an invalid address for rank %d",
                                  rank, nranks, root.c_str(), i);
        }
    }
    *table = std::move(result);
    return vcclSuccess;
}

} // namespace

/* ---------------------------------------------------------------------------------------------------- */
/* Factories                                                                                             */

vcclResult_t tcp_unique_id_create(vcclUniqueId* out) {
    if (out == nullptr) return set_last_error(vcclInvalidArgument, "vcclGetUniqueId: uniqueId is NULL");
    sock::SockAddr addr;
    std::string ifname;
    VCCL_RETURN_IF_ERROR(sock::select_local_address(&addr, &ifname));
    uid::Info info;
    VCCL_RETURN_IF_ERROR(uid::random_bytes(info.secret, sizeof(info.secret)));
    VCCL_RETURN_IF_ERROR(tcp_root_start(addr, info.secret, &info.root));
    VCCL_INFO(kLogBootstrap, "bootstrap root listening on %s (interface %s)", info.root.to_string().c_str(), ifname.c_str());
    uid::encode(info, out);
    return vcclSuccess;
}

vcclResult_t tcp_bootstrap_create(const vcclUniqueId& id, int rank, int nranks, std::shared_ptr<Bootstrap>* out,
                                  const CancelScope* cancel) {
    if (out == nullptr) return set_last_error(vcclInvalidArgument, "tcp bootstrap: NULL output pointer");
    if (nranks < 1 || uint32_t(nranks) > tcpproto::kMaxRanks) {
        return set_last_error(vcclInvalidArgument, "bootstrap: nranks %d out of range [1, %u]", nranks, tcpproto::kMaxRanks);
    }
    if (rank < 0 || rank >= nranks) {
        return set_last_error(vcclInvalidArgument, "bootstrap: rank %d out of range [0, %d)", rank, nranks);
    }
    uid::Info info;
    VCCL_RETURN_IF_ERROR(uid::decode(id, &info));

    // Listen before registering: once the root publishes the table, peers may connect at any moment.
    sock::SockAddr local, listen_addr;
    std::string ifname;
    VCCL_RETURN_IF_ERROR(sock::select_local_address(&local, &ifname));
    sock::Fd listen_fd;
    VCCL_RETURN_IF_ERROR(sock::listen_on(local, &listen_fd, &listen_addr));

    std::vector<sock::SockAddr> table;
    VCCL_RETURN_IF_ERROR(register_with_root(info, rank, nranks, listen_addr, cancel, &table));
    VCCL_INFO(kLogBootstrap, "rank %d of %d: bootstrap ready, listening on %s (interface %s)", rank, nranks,
              listen_addr.to_string().c_str(), ifname.c_str());
    *out = std::make_shared<TcpBootstrap>(rank, info.secret, std::move(table), std::move(listen_fd), listen_addr);
    return vcclSuccess;
}

/* ---------------------------------------------------------------------------------------------------- */
/* TcpBootstrap                                                                                          */

TcpBootstrap::TcpBootstrap(int rank, const uint8_t (&secret)[wire::kSecretBytes], std::vector<sock::SockAddr> peers,
                           sock::Fd listen_fd, const sock::SockAddr& listen_addr)
    : rank_(rank), peers_(std::move(peers)), listen_fd_(std::move(listen_fd)), listen_addr_(listen_addr) {
    memcpy(secret_, secret, sizeof(secret_));
    out_.reserve(peers_.size());
    for (size_t i = 0; i < peers_.size(); ++i) out_.push_back(std::make_unique<Outgoing>());
}

TcpBootstrap::~TcpBootstrap() = default;

void TcpBootstrap::abort() {
    aborted_.store(true, std::memory_order_release);
    std::lock_guard<std::mutex> lock(mutex_);
    cv_.notify_all();
}

vcclResult_t TcpBootstrap::send(int peer, uint64_t tag, const void* data, size_t bytes) {
    return send_cancellable(peer, tag, data, bytes, nullptr);
}

vcclResult_t TcpBootstrap::recv(int peer, uint64_t tag, void* data, size_t bytes) {
    return recv_cancellable(peer, tag, data, bytes, nullptr);
}

vcclResult_t TcpBootstrap::send_cancellable(int peer, uint64_t tag, const void* data, size_t bytes,
                                            const CancelScope* cancel) {
    if (peer < 0 || peer >= nranks()) {
        return set_last_error(vcclInvalidArgument, "bootstrap rank %d: send to peer %d out of range [0, %d)", rank_, peer,
                              nranks());
    }
    if (data == nullptr && bytes > 0) {
        return set_last_error(vcclInvalidArgument, "bootstrap rank %d: send of %zu bytes from a NULL buffer", rank_, bytes);
    }
    const std::string what = describe("bootstrap rank %d: sending %zu bytes (tag 0x%" PRIx64 ") to rank %d at %s", rank_,
                                      bytes, tag, peer, peers_[peer].to_string().c_str());
    if (cancelled(cancel)) return aborted_error(what);
    if (peer == rank_) {
        const uint8_t* p = static_cast<const uint8_t*>(data);
        deliver(rank_, tag, std::vector<uint8_t>(p, p + bytes));
        return vcclSuccess;
    }
    const Deadline deadline = bootstrap_deadline();
    const CancelScope scope{&aborted_, cancel};
    Outgoing& out = *out_[peer];
    std::lock_guard<std::mutex> lock(out.mutex);
    if (out.broken) {
        return set_last_error(vcclRemoteError, "%s: the connection failed earlier and cannot be reused", what.c_str());
    }
    if (!out.fd.valid()) {
        sock::Fd fd;
        VCCL_RETURN_IF_ERROR(sock::connect_to(peers_[peer], deadline, &scope, what.c_str(), &fd));
        uint8_t pre[tcpproto::kPreambleBytes];
        wire::Writer w(pre);
        w.u32(tcpproto::kPeerMagic);
        w.u32(tcpproto::kVersion);
        w.bytes(secret_, sizeof(secret_));
        w.u32(uint32_t(rank_));
        w.u32(uint32_t(peer));
        out.fd = std::move(fd);
        vcclResult_t res = write_message(out, pre, sizeof(pre), deadline, &scope, what.c_str());
        if (res != vcclSuccess) return res;
    }
    uint8_t head[tcpproto::kMsgHeaderBytes];
    wire::Writer w(head);
    w.u64(tag);
    w.u64(bytes);
    VCCL_RETURN_IF_ERROR(write_message(out, head, sizeof(head), deadline, &scope, what.c_str()));
    return write_message(out, data, bytes, deadline, &scope, what.c_str());
}

vcclResult_t TcpBootstrap::write_message(Outgoing& out, const void* data, size_t bytes, const Deadline& deadline,
                                         const CancelScope* cancel, const char* what) {
    const uint8_t* p = static_cast<const uint8_t*>(data);
    while (bytes > 0) {
        size_t done = 0;
        vcclResult_t res = sock::send_some(out.fd.get(), p, bytes, &done, what);
        if (res == vcclSuccess && done == 0) {
            // The peer's buffer is full. Keep reading our own incoming data meanwhile: the peer may itself be
            // blocked sending to us and only drains its socket once we drain ours.
            if (CancelScope::cancelled(cancel)) {
                res = aborted_error(what);
            } else if (deadline.expired()) {
                res = timeout_error(what);
            } else {
                res = progress_or_wait(deadline.remaining_ms(5), out.fd.get());
            }
        }
        if (res != vcclSuccess) {
            out.broken = true; // part of a message may be on the wire: the stream cannot be resynchronised
            out.fd.reset();
            return res;
        }
        p += done;
        bytes -= done;
    }
    return vcclSuccess;
}

vcclResult_t TcpBootstrap::recv_cancellable(int peer, uint64_t tag, void* data, size_t bytes, const CancelScope* cancel) {
    if (peer < 0 || peer >= nranks()) {
        return set_last_error(vcclInvalidArgument, "bootstrap rank %d: receive from peer %d out of range [0, %d)", rank_,
                              peer, nranks());
    }
    if (data == nullptr && bytes > 0) {
        return set_last_error(vcclInvalidArgument, "bootstrap rank %d: receive of %zu bytes into a NULL buffer", rank_, bytes);
    }
    const Deadline deadline = bootstrap_deadline();
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
        auto it = stash_.find({peer, tag});
        if (it != stash_.end() && !it->second.empty()) {
            std::vector<uint8_t> msg = std::move(it->second.front());
            it->second.pop_front();
            if (it->second.empty()) stash_.erase(it);
            lock.unlock();
            if (msg.size() != bytes) {
                return set_last_error(vcclInternalError,
                                      "bootstrap rank %d: message from rank %d (tag 0x%" PRIx64 ") has %zu bytes, the receive "
                                      "expects %zu",
                                      rank_, peer, tag, msg.size(), bytes);
            }
            if (bytes > 0) memcpy(data, msg.data(), bytes);
            return vcclSuccess;
        }
        if (cancelled(cancel) || deadline.expired()) {
            const std::string what =
                describe("bootstrap rank %d: waiting for %zu bytes (tag 0x%" PRIx64 ") from rank %d", rank_, bytes, tag, peer);
            return cancelled(cancel) ? aborted_error(what) : timeout_error(what);
        }
        if (!poller_active_) {
            poller_active_ = true;
            lock.unlock();
            vcclResult_t res = progress(deadline.remaining_ms(sock::kPollSliceMs));
            lock.lock();
            poller_active_ = false;
            cv_.notify_all(); // another waiter may take the role over
            if (res != vcclSuccess) return res;
        } else {
            cv_.wait_for(lock, std::chrono::milliseconds(sock::kPollSliceMs));
        }
    }
}

vcclResult_t TcpBootstrap::progress_or_wait(int wait_ms, int fd_out) {
    bool poller = false;
    {
        std::lock_guard<std::mutex> lock(mutex_);
        if (!poller_active_) poller_active_ = poller = true;
    }
    if (poller) {
        vcclResult_t res = progress(wait_ms);
        std::lock_guard<std::mutex> lock(mutex_);
        poller_active_ = false;
        cv_.notify_all();
        return res;
    }
    // Another thread drains the incoming side; just wait for room in our socket.
    pollfd p{fd_out, POLLOUT, 0};
    poll(&p, 1, wait_ms);
    return vcclSuccess;
}

vcclResult_t TcpBootstrap::progress(int wait_ms) {
    std::vector<pollfd> pfds;
    pfds.reserve(in_.size() + 1);
    pfds.push_back({listen_fd_.get(), POLLIN, 0});
    for (const auto& in : in_) pfds.push_back({in->fd.get(), POLLIN, 0});
    int r = poll(pfds.data(), pfds.size(), wait_ms);
    if (r < 0) {
        if (errno == EINTR) return vcclSuccess;
        int err = errno;
        return set_last_error(vcclSystemError, "bootstrap rank %d: poll failed: %s", rank_, strerror(err));
    }
    if (r == 0) return vcclSuccess;
    std::vector<std::unique_ptr<Incoming>> keep;
    keep.reserve(in_.size());
    for (size_t i = 0; i < in_.size(); ++i) {
        if (pfds[i + 1].revents == 0 || advance(*in_[i])) keep.push_back(std::move(in_[i]));
    }
    in_.swap(keep);
    if (pfds[0].revents != 0) accept_all();
    return vcclSuccess;
}

void TcpBootstrap::accept_all() {
    for (;;) {
        sock::Fd fd;
        sock::SockAddr from;
        if (sock::accept_pending(listen_fd_.get(), &fd, &from) != vcclSuccess || !fd.valid()) return;
        auto in = std::make_unique<Incoming>();
        in->fd = std::move(fd);
        in->from = from.to_string();
        in_.push_back(std::move(in));
    }
}

bool TcpBootstrap::check_preamble(Incoming& in) {
    wire::Reader r(in.head);
    const uint32_t magic = r.u32(), version = r.u32();
    uint8_t secret[wire::kSecretBytes];
    r.bytes(secret, sizeof(secret));
    const uint32_t src = r.u32(), dst = r.u32();
    const char* why = nullptr;
    if (magic != tcpproto::kPeerMagic) {
        why = "not a vccl bootstrap peer";
    } else if (!wire::secrets_equal(secret, secret_)) {
        why = "wrong secret (not from this bootstrap)";
    } else if (version != tcpproto::kVersion) {
        why = "different bootstrap protocol version";
    } else if (src >= uint32_t(nranks()) || dst != uint32_t(rank_)) {
        why = "source or destination rank does not fit this bootstrap";
    }
    if (why != nullptr) {
        VCCL_WARN(kLogBootstrap, "bootstrap rank %d: dropped a connection from %s: %s", rank_, in.from.c_str(), why);
        return false;
    }
    in.src = int(src);
    return true;
}

bool TcpBootstrap::advance(Incoming& in) {
    for (;;) {
        uint8_t* dst;
        size_t want;
        if (in.src < 0) {
            dst = in.head + in.head_got;
            want = tcpproto::kPreambleBytes - in.head_got;
        } else if (!in.in_payload) {
            dst = in.head + in.head_got;
            want = tcpproto::kMsgHeaderBytes - in.head_got;
        } else {
            dst = in.payload.data() + in.payload_got;
            want = in.payload.size() - in.payload_got;
        }
        size_t n = 0;
        bool eof = false;
        const bool ok = sock::read_some(in.fd.get(), dst, want, &n, &eof, "bootstrap: reading from a peer") == vcclSuccess;
        if (!ok || eof) {
            // A peer that finished (destroyed its bootstrap) closes between messages; anything else is a loss.
            if (!ok || in.src < 0 || in.in_payload || in.head_got != 0) {
                VCCL_WARN(kLogBootstrap, "bootstrap rank %d: connection from rank %d (%s) lost mid-message", rank_, in.src,
                          in.from.c_str());
            }
            return false;
        }
        if (n == 0) return true; // drained for now
        if (in.src < 0) {
            in.head_got += n;
            if (in.head_got < tcpproto::kPreambleBytes) continue;
            if (!check_preamble(in)) return false;
            in.head_got = 0;
        } else if (!in.in_payload) {
            in.head_got += n;
            if (in.head_got < tcpproto::kMsgHeaderBytes) continue;
            wire::Reader r(in.head);
            in.tag = r.u64();
            const uint64_t bytes = r.u64();
            in.head_got = 0;
            if (bytes > tcpproto::kMaxMessageBytes) {
                VCCL_WARN(kLogBootstrap, "bootstrap rank %d: rank %d announced a %" PRIu64 "-byte message: dropping the connection",
                          rank_, in.src, bytes);
                return false;
            }
            in.payload.assign(size_t(bytes), 0);
            in.payload_got = 0;
            in.in_payload = true;
        } else {
            in.payload_got += n;
        }
        if (in.in_payload && in.payload_got == in.payload.size()) {
            in.in_payload = false;
            deliver(in.src, in.tag, std::move(in.payload));
            in.payload = std::vector<uint8_t>();
        }
    }
}

void TcpBootstrap::deliver(int src, uint64_t tag, std::vector<uint8_t>&& payload) {
    std::lock_guard<std::mutex> lock(mutex_);
    stash_[{src, tag}].push_back(std::move(payload));
    cv_.notify_all();
}

} // namespace vccl
