/* SPDX-License-Identifier: BSD-3-Clause */
#include "bootstrap/tcp/socket_util.h"

#include <cerrno>
#include <cstring>
#include <vector>

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <unistd.h>

#include "core/env.h"
#include "core/log.h"
#include "core/status.h"

namespace vccl {
namespace sock {

uint16_t SockAddr::port() const {
    if (family() == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in*>(&storage)->sin_port);
    if (family() == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6*>(&storage)->sin6_port);
    return 0;
}

void SockAddr::set_port(uint16_t port) {
    if (family() == AF_INET) reinterpret_cast<sockaddr_in*>(&storage)->sin_port = htons(port);
    if (family() == AF_INET6) reinterpret_cast<sockaddr_in6*>(&storage)->sin6_port = htons(port);
}

std::string SockAddr::to_string() const {
    char ip[INET6_ADDRSTRLEN] = "?";
    if (family() == AF_INET) {
        inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(&storage)->sin_addr, ip, sizeof(ip));
        return std::string(ip) + ":" + std::to_string(port());
    }
    if (family() == AF_INET6) {
        inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(&storage)->sin6_addr, ip, sizeof(ip));
        return "[" + std::string(ip) + "]:" + std::to_string(port());
    }
    return "<no address>";
}

bool SockAddr::from_ip(const char* ip, uint16_t port, SockAddr* out) {
    SockAddr a;
    auto* v4 = reinterpret_cast<sockaddr_in*>(&a.storage);
    auto* v6 = reinterpret_cast<sockaddr_in6*>(&a.storage);
    if (inet_pton(AF_INET, ip, &v4->sin_addr) == 1) {
        v4->sin_family = AF_INET;
        a.len = sizeof(sockaddr_in);
    } else if (inet_pton(AF_INET6, ip, &v6->sin6_addr) == 1) {
        v6->sin6_family = AF_INET6;
        a.len = sizeof(sockaddr_in6);
    } else {
        return false;
    }
    a.set_port(port);
    *out = a;
    return true;
}

void Fd::reset() {
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
}

/* ---------------------------------------------------------------------------------------------------- */
/* Address selection                                                                                     */

bool ifname_matches(const std::string& spec_in, const char* name) {
    std::string spec = spec_in;
    bool exclude = false, exact = false;
    if (!spec.empty() && spec[0] == '^') {
        exclude = true;
        spec.erase(0, 1);
    }
    if (!spec.empty() && spec[0] == '=') {
        exact = true;
        spec.erase(0, 1);
    }
    if (spec.empty()) return !exclude;
    bool listed = false;
    size_t start = 0;
    while (start <= spec.size()) {
        size_t comma = spec.find(',', start);
        if (comma == std::string::npos) comma = spec.size();
        std::string item = spec.substr(start, comma - start);
        if (!item.empty()) {
            if (exact ? item == name : strncmp(name, item.c_str(), item.size()) == 0) listed = true;
        }
        start = comma + 1;
    }
    return exclude ? !listed : listed;
}

namespace {

bool is_link_local6(const sockaddr_in6* a) { return IN6_IS_ADDR_LINKLOCAL(&a->sin6_addr); }

/* Preference of an interface address; 0 means unusable. Higher is better. */
int address_rank(const ifaddrs* ifa, bool user_filter) {
    if (ifa->ifa_addr == nullptr || !(ifa->ifa_flags & IFF_UP)) return 0;
    const int family = ifa->ifa_addr->sa_family;
    if (family != AF_INET && family != AF_INET6) return 0;
    if (family == AF_INET6 && is_link_local6(reinterpret_cast<const sockaddr_in6*>(ifa->ifa_addr))) return 0;
    const bool loopback = (ifa->ifa_flags & IFF_LOOPBACK) != 0;
    // Without a filter loopback is the last resort: it only works when every rank is on this host.
    if (loopback && !user_filter) return family == AF_INET ? 2 : 1;
    return family == AF_INET ? 4 : 3;
}

} // namespace

vcclResult_t select_local_address(SockAddr* out, std::string* ifname) {
    const std::string spec = env::get_str(env::kSocketIfname);
    ifaddrs* list = nullptr;
    if (getifaddrs(&list) != 0) {
        int err = errno;
        return set_last_error(vcclSystemError, "bootstrap: getifaddrs failed: %s", strerror(err));
    }
    const ifaddrs* best = nullptr;
    int best_rank = 0;
    for (const ifaddrs* ifa = list; ifa != nullptr; ifa = ifa->ifa_next) {
        if (!spec.empty() && !ifname_matches(spec, ifa->ifa_name)) continue;
        int r = address_rank(ifa, !spec.empty());
        if (r > best_rank) { // strict: the first interface of the best kind wins
            best = ifa;
            best_rank = r;
        }
    }
    if (best == nullptr) {
        freeifaddrs(list);
        return set_last_error(vcclSystemError,
                              "bootstrap: no network interface that is up with an IPv4 or global IPv6 address%s%s%s",
                              spec.empty() ? "" : " matches VCCL_SOCKET_IFNAME=\"", spec.c_str(), spec.empty() ? "" : "\"");
    }
    SockAddr a;
    a.len = best->ifa_addr->sa_family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
    memcpy(&a.storage, best->ifa_addr, a.len);
    a.set_port(0);
    if (ifname) *ifname = best->ifa_name;
    freeifaddrs(list);
    *out = a;
    return vcclSuccess;
}

/* ---------------------------------------------------------------------------------------------------- */
/* Sockets                                                                                               */

namespace {

vcclResult_t new_socket(int family, Fd* out) {
    int fd = socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        int err = errno;
        return set_last_error(vcclSystemError, "bootstrap: socket() failed: %s", strerror(err));
    }
    // Bootstrap messages are small request/response exchanges: Nagle would only add latency.
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    *out = Fd(fd);
    return vcclSuccess;
}

/* poll() one fd for at most kPollSliceMs or the time left. Returns revents (0 on timeout). */
vcclResult_t poll_slice(int fd, short events, const Deadline& deadline, const char* what, short* revents) {
    pollfd p{fd, events, 0};
    int r = poll(&p, 1, deadline.remaining_ms(kPollSliceMs));
    if (r < 0) {
        if (errno == EINTR) {
            *revents = 0;
            return vcclSuccess;
        }
        int err = errno;
        return set_last_error(vcclSystemError, "%s: poll failed: %s", what, strerror(err));
    }
    *revents = r > 0 ? p.revents : 0;
    return vcclSuccess;
}

vcclResult_t timed_out(const char* what) {
    VCCL_WARN(kLogBootstrap, "%s: timed out after %d s", what, bootstrap_timeout_s());
    return set_last_error(vcclTimeout, "%s: timed out after %d s (VCCL_BOOTSTRAP_TIMEOUT)", what, bootstrap_timeout_s());
}

vcclResult_t cancelled(const char* what) {
    return set_last_error(vcclRemoteError, "%s: bootstrap aborted", what);
}

} // namespace

vcclResult_t listen_on(const SockAddr& addr, Fd* out, SockAddr* bound) {
    Fd fd;
    VCCL_RETURN_IF_ERROR(new_socket(addr.family(), &fd));
    if (bind(fd.get(), addr.sa(), addr.len) != 0) {
        int err = errno;
        return set_last_error(vcclSystemError, "bootstrap: bind to %s failed: %s", addr.to_string().c_str(), strerror(err));
    }
    if (listen(fd.get(), SOMAXCONN) != 0) {
        int err = errno;
        return set_last_error(vcclSystemError, "bootstrap: listen on %s failed: %s", addr.to_string().c_str(), strerror(err));
    }
    SockAddr actual;
    actual.len = sizeof(actual.storage);
    if (getsockname(fd.get(), reinterpret_cast<sockaddr*>(&actual.storage), &actual.len) != 0) {
        int err = errno;
        return set_last_error(vcclSystemError, "bootstrap: getsockname failed: %s", strerror(err));
    }
    *bound = actual;
    *out = std::move(fd);
    return vcclSuccess;
}

vcclResult_t accept_pending(int listen_fd, Fd* out, SockAddr* peer) {
    SockAddr a;
    a.len = sizeof(a.storage);
    int fd = accept4(listen_fd, reinterpret_cast<sockaddr*>(&a.storage), &a.len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
        // Nothing pending, or a connection that died in the backlog: neither is an error of ours.
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR || errno == ECONNABORTED || errno == EPROTO) {
            return vcclSuccess;
        }
        int err = errno;
        return set_last_error(vcclSystemError, "bootstrap: accept failed: %s", strerror(err));
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    *out = Fd(fd);
    if (peer) *peer = a;
    return vcclSuccess;
}

vcclResult_t wait_ready(int fd, short events, const Deadline& deadline, const CancelScope* cancel, const char* what) {
    for (;;) {
        if (CancelScope::cancelled(cancel)) return cancelled(what);
        short revents = 0;
        VCCL_RETURN_IF_ERROR(poll_slice(fd, events, deadline, what, &revents));
        // Errors and hang-ups count as ready: the following send/recv reports them precisely.
        if (revents != 0) return vcclSuccess;
        if (deadline.expired()) return timed_out(what);
    }
}

vcclResult_t connect_to(const SockAddr& addr, const Deadline& deadline, const CancelScope* cancel, const char* what,
                        Fd* out) {
    int last_err = 0;
    for (;;) {
        if (CancelScope::cancelled(cancel)) return cancelled(what);
        Fd fd;
        VCCL_RETURN_IF_ERROR(new_socket(addr.family(), &fd));
        int r = connect(fd.get(), addr.sa(), addr.len);
        int err = r == 0 ? 0 : errno;
        if (err == EINPROGRESS) {
            VCCL_RETURN_IF_ERROR(wait_ready(fd.get(), POLLOUT, deadline, cancel, what));
            socklen_t len = sizeof(err);
            if (getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
        }
        if (err == 0) {
            *out = std::move(fd);
            return vcclSuccess;
        }
        // Refused or reset: the listener may not exist yet (a peer still starting). Anything else is final.
        if (err != ECONNREFUSED && err != ECONNRESET && err != ETIMEDOUT && err != EHOSTUNREACH && err != ENETUNREACH) {
            return set_last_error(vcclRemoteError, "%s: connect failed: %s", what, strerror(err));
        }
        last_err = err;
        if (deadline.expired()) {
            VCCL_WARN(kLogBootstrap, "%s: last connect error: %s", what, strerror(last_err));
            return timed_out(what);
        }
        // Back off a little so a missing peer does not turn into a connect storm.
        pollfd none{-1, 0, 0};
        poll(&none, 0, deadline.remaining_ms(20));
    }
}

vcclResult_t send_some(int fd, const void* data, size_t bytes, size_t* done, const char* what) {
    *done = 0;
    if (bytes == 0) return vcclSuccess;
    ssize_t n = ::send(fd, data, bytes, MSG_NOSIGNAL);
    if (n >= 0) {
        *done = size_t(n);
        return vcclSuccess;
    }
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return vcclSuccess;
    int err = errno;
    return set_last_error(vcclRemoteError, "%s: send failed: %s", what, strerror(err));
}

vcclResult_t read_some(int fd, void* data, size_t bytes, size_t* done, bool* eof, const char* what) {
    *done = 0;
    *eof = false;
    if (bytes == 0) return vcclSuccess;
    ssize_t n = ::recv(fd, data, bytes, 0);
    if (n > 0) {
        *done = size_t(n);
        return vcclSuccess;
    }
    if (n == 0) {
        *eof = true;
        return vcclSuccess;
    }
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return vcclSuccess;
    int err = errno;
    return set_last_error(vcclRemoteError, "%s: receive failed: %s", what, strerror(err));
}

vcclResult_t send_all(int fd, const void* data, size_t bytes, const Deadline& deadline, const CancelScope* cancel,
                      const char* what) {
    const char* p = static_cast<const char*>(data);
    while (bytes > 0) {
        size_t n = 0;
        VCCL_RETURN_IF_ERROR(send_some(fd, p, bytes, &n, what));
        p += n;
        bytes -= n;
        if (bytes > 0 && n == 0) VCCL_RETURN_IF_ERROR(wait_ready(fd, POLLOUT, deadline, cancel, what));
    }
    return vcclSuccess;
}

vcclResult_t recv_all(int fd, void* data, size_t bytes, const Deadline& deadline, const CancelScope* cancel,
                      const char* what) {
    char* p = static_cast<char*>(data);
    while (bytes > 0) {
        size_t n = 0;
        bool eof = false;
        VCCL_RETURN_IF_ERROR(read_some(fd, p, bytes, &n, &eof, what));
        if (eof) return set_last_error(vcclRemoteError, "%s: connection closed by the peer", what);
        p += n;
        bytes -= n;
        if (bytes > 0 && n == 0) VCCL_RETURN_IF_ERROR(wait_ready(fd, POLLIN, deadline, cancel, what));
    }
    return vcclSuccess;
}

} // namespace sock
} // namespace vccl
