/* SPDX-License-Identifier: BSD-3-Clause */
#include "transport/cuda_ipc/fd_channel.h"

#include <errno.h>
#include <poll.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <set>
#include <string>

#include "core/log.h"

namespace vccl {

namespace {

constexpr uint32_t kMagic = 0x76666432u; // "vfd2": sets of descriptors with a value each

enum : uint32_t { kDescriptor = 1, kForget = 2 };

/* One datagram: who sends, the proof, what kind, and what the descriptors are for. A kDescriptor datagram
 * carries `count` descriptors (1 to kMaxFds) and, after this header, one 64-bit value for each; a kForget
 * datagram neither. */
struct Datagram {
    uint32_t magic;
    uint32_t kind;
    int32_t rank;
    uint32_t count;
    uint64_t secret;
    uint64_t key;
};

uint64_t random_u64() {
    uint64_t v = 0;
    if (getrandom(&v, sizeof(v), 0) != ssize_t(sizeof(v))) {
        // getrandom cannot fail for 8 bytes once the pool is ready; keep going with a weaker value
        v = uint64_t(std::chrono::steady_clock::now().time_since_epoch().count()) ^ (uint64_t(getpid()) << 32);
    }
    return v;
}

socklen_t fill_address(const std::string& path, sockaddr_un* sa) {
    memset(sa, 0, sizeof(*sa));
    sa->sun_family = AF_UNIX;
    // Abstract namespace: a leading NUL, and the length says where the name ends.
    memcpy(sa->sun_path + 1, path.data(), path.size());
    return socklen_t(offsetof(sockaddr_un, sun_path) + 1 + path.size());
}

} // namespace

std::string FdChannel::socket_path(uint64_t name) {
    char text[40];
    snprintf(text, sizeof(text), "vccl-fd-%016llx", static_cast<unsigned long long>(name));
    return text;
}

void FdChannel::FdSet::close_all() {
    for (int fd : fds) {
        if (fd >= 0) close(fd);
    }
    fds.clear();
    values.clear();
}

namespace {
/* Descriptors kept by every channel of the process (a framework has one communicator per parallel group),
 * and the channels. */
std::atomic<size_t> g_kept_fds{0};
std::atomic<size_t> g_channels{0};
} // namespace

FdChannel::FdChannel() { g_channels.fetch_add(1, std::memory_order_relaxed); }

void FdChannel::count_kept(size_t added, size_t removed) {
    kept_fds_ += added;
    kept_fds_ -= removed;
    g_kept_fds.fetch_add(added, std::memory_order_relaxed);
    g_kept_fds.fetch_sub(removed, std::memory_order_relaxed);
}

FdChannel::~FdChannel() {
    g_channels.fetch_sub(1, std::memory_order_relaxed);
    count_kept(0, kept_fds_);
    for (auto& entry : kept_) entry.second.second.close_all();
    if (sock_ >= 0) close(sock_);
}

bool FdChannel::open(int rank) {
    rank_ = rank;
    sock_ = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (sock_ < 0) return false;
    int on = 1;
    if (setsockopt(sock_, SOL_SOCKET, SO_PASSCRED, &on, sizeof(on)) != 0) {
        int saved = errno;
        close(sock_);
        sock_ = -1;
        errno = saved;
        return false;
    }
    secret_ = random_u64();
    for (int attempt = 0; attempt < 8; ++attempt) { // a random name is taken only by accident
        name_ = random_u64() | 1u; // never 0 (0 means "none")
        sockaddr_un sa;
        socklen_t len = fill_address(socket_path(name_), &sa);
        if (bind(sock_, reinterpret_cast<sockaddr*>(&sa), len) == 0) return true;
        if (errno != EADDRINUSE) break;
    }
    int saved = errno;
    close(sock_);
    sock_ = -1;
    name_ = 0;
    errno = saved;
    return false;
}

bool FdChannel::send_datagram(int peer, uint32_t kind, uint64_t key, const FdSet* set) {
    if (sock_ < 0 || peer < 0 || size_t(peer) >= peers_.size() || peers_[peer].name == 0) return false;
    size_t count = set != nullptr ? set->fds.size() : 0;
    if (count > kMaxFds || (set != nullptr && set->values.size() != count)) return false;
    Datagram d{kMagic, kind, int32_t(rank_), uint32_t(count), secret_, key};
    iovec iov[2] = {{&d, sizeof(d)}, {nullptr, 0}};
    if (count > 0) iov[1] = iovec{const_cast<uint64_t*>(set->values.data()), count * sizeof(uint64_t)};
    alignas(cmsghdr) char control[CMSG_SPACE(kMaxFds * sizeof(int))];
    memset(control, 0, sizeof(control));
    msghdr msg;
    memset(&msg, 0, sizeof(msg));
    sockaddr_un sa;
    msg.msg_name = &sa;
    msg.msg_namelen = fill_address(socket_path(peers_[peer].name), &sa);
    msg.msg_iov = iov;
    msg.msg_iovlen = count > 0 ? 2 : 1;
    if (count > 0) {
        msg.msg_control = control;
        msg.msg_controllen = CMSG_SPACE(count * sizeof(int));
        cmsghdr* c = CMSG_FIRSTHDR(&msg);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(count * sizeof(int));
        memcpy(CMSG_DATA(c), set->fds.data(), count * sizeof(int));
    }
    const ssize_t expected = ssize_t(sizeof(d) + count * sizeof(uint64_t));
    ssize_t n;
    do {
        n = sendmsg(sock_, &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
    } while (n < 0 && errno == EINTR);
    if (n != expected) {
        // Typically EAGAIN: the peer has net.unix.max_dgram_qlen datagrams queued that it has not drained.
        VCCL_INFO(kLogDevice, "rank %d: cannot send a %s datagram to rank %d: %s", rank_,
                  kind == kDescriptor ? "buffer descriptor" : "forget", peer, n < 0 ? strerror(errno) : "short send");
        return false;
    }
    return true;
}

bool FdChannel::offer(int peer, uint64_t key, const std::function<int()>& make_fd) {
    return offer_set(peer, key, [&](FdSet* set) {
        int fd = make_fd();
        if (fd < 0) return false;
        set->fds.push_back(fd);
        set->values.push_back(0);
        return true;
    });
}

bool FdChannel::offer_set(int peer, uint64_t key, const std::function<bool(FdSet*)>& make) {
    if (sock_ < 0) return false;
    drain(); // forgets first: the peer may have let go of this one
    auto k = std::make_pair(peer, key);
    if (offered_.count(k) != 0) return true;
    FdSet set;
    bool made = make(&set);
    bool sent = made && !set.fds.empty() && send_datagram(peer, kDescriptor, key, &set);
    set.close_all();
    if (sent) offered_.insert(k);
    return sent;
}

void FdChannel::prune_offers(const std::function<bool(uint64_t)>& alive) {
    for (auto it = offered_.begin(); it != offered_.end();) {
        if (alive(it->second)) {
            ++it;
        } else {
            it = offered_.erase(it);
        }
    }
}

void FdChannel::forget(int peer, uint64_t key) {
    if (sock_ < 0) return;
    if (!send_datagram(peer, kForget, key, nullptr)) unsent_forgets_.emplace_back(peer, key);
}

bool FdChannel::drain() {
    if (!unsent_forgets_.empty()) {
        std::vector<std::pair<int, uint64_t>> again;
        again.swap(unsent_forgets_);
        for (auto& f : again) forget(f.first, f.second);
    }
    for (;;) {
        Datagram d;
        memset(&d, 0, sizeof(d));
        uint64_t values[kMaxFds + 1]; // one more than allowed, so that an oversized datagram shows as one
        iovec iov[2] = {{&d, sizeof(d)}, {values, sizeof(values)}};
        // Room for more descriptors than a well-formed datagram carries, so extra ones are received (and
        // closed) instead of being silently cut off.
        alignas(cmsghdr) char control[CMSG_SPACE((kMaxFds + 4) * sizeof(int)) + CMSG_SPACE(sizeof(ucred))];
        msghdr msg;
        memset(&msg, 0, sizeof(msg));
        msg.msg_iov = iov;
        msg.msg_iovlen = 2;
        msg.msg_control = control;
        msg.msg_controllen = sizeof(control);
        ssize_t n = recvmsg(sock_, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
        if (n < 0) {
            if (errno == EINTR) continue;
            return errno == EAGAIN || errno == EWOULDBLOCK;
        }
        std::vector<int> fds;
        bool have_cred = false;
        ucred cred{};
        for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
            if (c->cmsg_level != SOL_SOCKET) continue;
            if (c->cmsg_type == SCM_RIGHTS) {
                size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
                for (size_t i = 0; i < count; ++i) {
                    int fd;
                    memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
                    fds.push_back(fd);
                }
            } else if (c->cmsg_type == SCM_CREDENTIALS && c->cmsg_len >= CMSG_LEN(sizeof(ucred))) {
                memcpy(&cred, CMSG_DATA(c), sizeof(cred));
                have_cred = true;
            }
        }
        const size_t count = d.kind == kDescriptor ? size_t(d.count) : 0;
        bool ok = n >= ssize_t(sizeof(d)) && !(msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) && d.magic == kMagic &&
                  (d.kind == kDescriptor ? count >= 1 && count <= kMaxFds : d.kind == kForget && d.count == 0) &&
                  n == ssize_t(sizeof(d) + count * sizeof(uint64_t)) && fds.size() == count &&
                  have_cred && cred.uid == getuid() && d.rank >= 0 && size_t(d.rank) < peers_.size() &&
                  peers_[d.rank].name != 0 && d.secret == peers_[d.rank].secret;
        if (!ok) {
            for (int fd : fds) close(fd);
            if (++rejected_ == 1) {
                VCCL_WARN(kLogDevice, "rank %d: dropped a datagram on its descriptor socket that no rank of this "
                          "communicator sent", rank_);
            }
            continue;
        }
        auto key = std::make_pair(int(d.rank), d.key);
        if (d.kind == kForget) {
            offered_.erase(key);
            continue;
        }
        auto it = kept_.find(key);
        if (it != kept_.end()) { // sent again before it was taken: the newer one stands
            count_kept(0, it->second.second.fds.size());
            it->second.second.close_all();
            kept_.erase(it);
        }
        FdSet set;
        set.fds = fds;
        set.values.assign(values, values + count);
        count_kept(count, 0);
        kept_.emplace(key, std::make_pair(++arrivals_, std::move(set)));
        // Never asked for (a transfer given up after its descriptors came): the oldest go.
        const size_t share = max_kept_fds() / std::max<size_t>(1, g_channels.load(std::memory_order_relaxed));
        while (kept_.size() > kMaxKept || (g_kept_fds.load(std::memory_order_relaxed) > max_kept_fds() &&
                                           kept_fds_ > share && kept_.size() > 1)) {
            auto oldest = kept_.begin();
            for (auto i = kept_.begin(); i != kept_.end(); ++i) {
                if (i->second.first < oldest->second.first) oldest = i;
            }
            count_kept(0, oldest->second.second.fds.size());
            oldest->second.second.close_all();
            int from = oldest->first.first;
            uint64_t k = oldest->first.second;
            kept_.erase(oldest);
            forget(from, k);
        }
    }
}

size_t FdChannel::max_kept_fds() {
    static const size_t limit = [] {
        rlimit rl{};
        if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY) return size_t(4096);
        return std::min(size_t(4096), std::max(size_t(256), size_t(rl.rlim_cur / 4)));
    }();
    return limit;
}

int FdChannel::take(int peer, uint64_t key, int wait_ms, std::string* why) {
    FdSet set;
    if (!take_set(peer, key, wait_ms, &set, why)) return -1;
    if (set.fds.size() == 1) return set.fds[0];
    set.close_all();
    if (why != nullptr) *why = "rank " + std::to_string(peer) + " sent several descriptors where one was expected";
    return -1;
}

bool FdChannel::take_set(int peer, uint64_t key, int wait_ms, FdSet* out, std::string* why) {
    out->close_all();
    if (sock_ < 0) {
        if (why != nullptr) *why = "no descriptor socket";
        return false;
    }
    auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(wait_ms);
    for (;;) {
        if (!drain()) {
            if (why != nullptr) *why = std::string("descriptor socket: ") + strerror(errno);
            return false;
        }
        auto it = kept_.find(std::make_pair(peer, key));
        if (it != kept_.end()) {
            *out = std::move(it->second.second);
            count_kept(0, out->fds.size());
            kept_.erase(it);
            return true;
        }
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
        if (left.count() <= 0) {
            if (why != nullptr) {
                char text[160];
                snprintf(text, sizeof(text), "rank %d's buffer descriptor did not arrive within %d ms", peer, wait_ms);
                *why = text;
            }
            return false;
        }
        pollfd p{sock_, POLLIN, 0};
        poll(&p, 1, int(left.count()) + 1);
    }
}

} // namespace vccl
