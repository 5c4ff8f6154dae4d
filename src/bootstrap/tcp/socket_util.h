/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Socket helpers for the TCP bootstrap: choosing the address to offer, and bounded I/O. Every socket is
 * nonblocking and close-on-exec; every wait is a poll() bounded by a Deadline and broken early by a
 * CancelScope, so no call here can hang.
 */
#ifndef VCCL_BOOTSTRAP_TCP_SOCKET_UTIL_H_
#define VCCL_BOOTSTRAP_TCP_SOCKET_UTIL_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include <netinet/in.h>
#include <sys/socket.h>

#include "bootstrap/bootstrap.h"
#include "core/clock.h"
#include "vccl.h"

namespace vccl {
namespace sock {

/* An IPv4 or IPv6 socket address. */
struct SockAddr {
    sockaddr_storage storage{};
    socklen_t len = 0;

    int family() const { return storage.ss_family; }
    const sockaddr* sa() const { return reinterpret_cast<const sockaddr*>(&storage); }
    uint16_t port() const;
    void set_port(uint16_t port);
    /* "10.0.0.1:4000" or "[fe80::1]:4000". */
    std::string to_string() const;
    /* Builds an address from text (IPv4 or IPv6, no port); false when it does not parse. */
    static bool from_ip(const char* ip, uint16_t port, SockAddr* out);
};

/* Owns a file descriptor; closes it on destruction. */
class Fd {
public:
    Fd() = default;
    explicit Fd(int fd) : fd_(fd) {}
    ~Fd() { reset(); }
    Fd(Fd&& other) noexcept : fd_(other.release()) {}
    Fd& operator=(Fd&& other) noexcept {
        if (this != &other) {
            reset();
            fd_ = other.release();
        }
        return *this;
    }
    Fd(const Fd&) = delete;
    Fd& operator=(const Fd&) = delete;

    int get() const { return fd_; }
    bool valid() const { return fd_ >= 0; }
    int release() {
        int fd = fd_;
        fd_ = -1;
        return fd;
    }
    void reset();

private:
    int fd_ = -1;
};

/* Does interface `name` pass the VCCL_SOCKET_IFNAME filter `spec`? Grammar (as NCCL's NCCL_SOCKET_IFNAME):
 * a comma list of prefixes ("eth,ib"); a leading '=' asks for exact names ("=eth0"); a leading '^' turns the
 * list into exclusions ("^docker,lo"; "^=eth1"). An empty spec matches everything. */
bool ifname_matches(const std::string& spec, const char* name);

/* The address (port 0) this process offers to peers: the first interface that is up and passes
 * VCCL_SOCKET_IFNAME, IPv4 preferred over IPv6 (link-local IPv6 is skipped). Without VCCL_SOCKET_IFNAME,
 * loopback is used only when no other interface is up. *ifname receives the interface chosen. */
vcclResult_t select_local_address(SockAddr* out, std::string* ifname);

/* A nonblocking listening socket on `addr` (port 0: any free port); *bound receives the actual address. */
vcclResult_t listen_on(const SockAddr& addr, Fd* out, SockAddr* bound);

/* Accepts one pending connection if there is one (*out stays invalid otherwise). */
vcclResult_t accept_pending(int listen_fd, Fd* out, SockAddr* peer);

/* Connects to `addr`, retrying refused connections (the peer may not listen yet) until the deadline.
 * `what` names the peer for messages, e.g. "rank 3 connecting to rank 5 (10.0.0.2:4000)". */
vcclResult_t connect_to(const SockAddr& addr, const Deadline& deadline, const CancelScope* cancel,
                        const char* what, Fd* out);

/* Waits until fd is ready for `events` (POLLIN/POLLOUT). vcclTimeout at the deadline, vcclRemoteError when
 * cancelled. Polls in slices of kPollSliceMs so cancellation is noticed promptly. */
vcclResult_t wait_ready(int fd, short events, const Deadline& deadline, const CancelScope* cancel,
                        const char* what);

/* Nonblocking transfers: move what the socket accepts now. *done receives the byte count (0: would block).
 * read_some sets *eof when the peer closed. Errors other than EAGAIN are vcclRemoteError (peer gone). */
vcclResult_t send_some(int fd, const void* data, size_t bytes, size_t* done, const char* what);
vcclResult_t read_some(int fd, void* data, size_t bytes, size_t* done, bool* eof, const char* what);

/* Blocking (bounded) transfers of exactly `bytes`. EOF before the end is vcclRemoteError. */
vcclResult_t send_all(int fd, const void* data, size_t bytes, const Deadline& deadline, const CancelScope* cancel,
                      const char* what);
vcclResult_t recv_all(int fd, void* data, size_t bytes, const Deadline& deadline, const CancelScope* cancel,
                      const char* what);

/* Milliseconds one poll() sleeps at most, so abort flags are seen within this delay. */
constexpr int kPollSliceMs = 50;

} // namespace sock
} // namespace vccl

#endif
