/* SPDX-License-Identifier: BSD-3-Clause */
#include "transport/failover/rail_probe.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/log.h"

namespace vccl {
namespace failover {

namespace {

uint32_t ipv4_of(const std::string& netdev) {
    if (netdev.empty()) return 0;
    struct ifaddrs* list = nullptr;
    if (getifaddrs(&list) != 0) return 0;
    uint32_t ip = 0;
    for (struct ifaddrs* a = list; a != nullptr && ip == 0; a = a->ifa_next) {
        if (a->ifa_addr == nullptr || a->ifa_addr->sa_family != AF_INET || netdev != a->ifa_name) continue;
        ip = reinterpret_cast<struct sockaddr_in*>(a->ifa_addr)->sin_addr.s_addr;
    }
    freeifaddrs(list);
    return ip;
}

struct sockaddr_in make_addr(uint32_t ip, uint16_t port) {
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = ip;
    sa.sin_port = port;
    return sa;
}

} // namespace

RailProbe::~RailProbe() {
    for (int fd : bound_fds_) {
        if (fd >= 0) close(fd);
    }
    for (Attempt& a : attempts_) {
        if (a.fd >= 0) close(a.fd);
    }
}

vcclResult_t RailProbe::init(Bootstrap* bootstrap, const std::vector<std::string>& netdevs) {
    rank_ = bootstrap->rank();
    nranks_ = bootstrap->nranks();
    paths_ = int(netdevs.size());
    bound_fds_.assign(size_t(paths_), -1);
    addrs_.assign(size_t(nranks_) * size_t(paths_), Addr());
    attempts_.assign(size_t(nranks_) * size_t(paths_), Attempt());
    Addr* mine = &addrs_[size_t(bootstrap->rank()) * size_t(paths_)];
    for (int p = 0; p < paths_; ++p) {
        uint32_t ip = ipv4_of(netdevs[size_t(p)]);
        if (ip == 0) continue;
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0) continue;
        struct sockaddr_in sa = make_addr(ip, 0);
        socklen_t len = sizeof(sa);
        if (bind(fd, reinterpret_cast<struct sockaddr*>(&sa), sizeof(sa)) != 0 ||
            getsockname(fd, reinterpret_cast<struct sockaddr*>(&sa), &len) != 0) {
            close(fd);
            continue;
        }
        bound_fds_[size_t(p)] = fd; // bound, never listening: a SYN to it is answered with a reset
        mine[p].ip = ip;
        mine[p].port = sa.sin_port;
    }
    // Every rank takes part whatever it found (the exchange is collective).
    return bootstrap->allgather(addrs_.data(), sizeof(Addr) * size_t(paths_));
}

RailProbe::Result RailProbe::finish(Attempt& a, Result r) {
    close(a.fd);
    a.fd = -1;
    return r;
}

RailProbe::Result RailProbe::poll(int path, int peer, uint64_t now, uint64_t timeout_ns) {
    if (path < 0 || path >= paths_ || peer < 0 || peer >= nranks_) return Result::Unknown;
    const Addr& to = addrs_[size_t(peer) * size_t(paths_) + size_t(path)];
    if (to.ip == 0 || bound_fds_[size_t(path)] < 0) return Result::Unknown;
    Attempt& a = attempts_[size_t(peer) * size_t(paths_) + size_t(path)];
    if (a.fd < 0) {
        a.fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (a.fd < 0) return Result::Unknown;
        // From this rank's address on the rail, so that the probe leaves through that rail.
        struct sockaddr_in from;
        socklen_t len = sizeof(from);
        getsockname(bound_fds_[size_t(path)], reinterpret_cast<struct sockaddr*>(&from), &len);
        from.sin_port = 0;
        if (bind(a.fd, reinterpret_cast<struct sockaddr*>(&from), sizeof(from)) != 0) return finish(a, Result::Unknown);
        a.started = now;
        struct sockaddr_in sa = make_addr(to.ip, to.port);
        if (connect(a.fd, reinterpret_cast<struct sockaddr*>(&sa), sizeof(sa)) == 0) return finish(a, Result::Reachable);
        if (errno == ECONNREFUSED) return finish(a, Result::Reachable);
        if (errno != EINPROGRESS) return finish(a, Result::Unreachable);
        return Result::Pending;
    }
    struct pollfd pfd = {a.fd, POLLOUT, 0};
    if (::poll(&pfd, 1, 0) > 0) {
        int err = 0;
        socklen_t len = sizeof(err);
        getsockopt(a.fd, SOL_SOCKET, SO_ERROR, &err, &len);
        // Refused or accepted: either way a packet came back over the rail.
        return finish(a, err == 0 || err == ECONNREFUSED ? Result::Reachable : Result::Unreachable);
    }
    if (now - a.started > timeout_ns) return finish(a, Result::Unreachable);
    return Result::Pending;
}

bool RailProbe::unique_peer_address(int path, int peer, uint32_t* local_ip, uint32_t* peer_ip,
                                    uint16_t* probe_port) const {
    if (path < 0 || path >= paths_ || peer < 0 || peer >= nranks_ || peer == rank_) return false;
    const Addr& to = addrs_[size_t(peer) * size_t(paths_) + size_t(path)];
    const Addr& from = addrs_[size_t(rank_) * size_t(paths_) + size_t(path)];
    if (to.ip == 0 || from.ip == 0) return false;
    for (int r = 0; r < nranks_; ++r) {
        if (r != peer && addrs_[size_t(r) * size_t(paths_) + size_t(path)].ip == to.ip) return false;
    }
    *local_ip = from.ip;
    *peer_ip = to.ip;
    *probe_port = to.port;
    return true;
}

} // namespace failover
} // namespace vccl
