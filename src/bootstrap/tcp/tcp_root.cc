/* SPDX-License-Identifier: BSD-3-Clause */
#include "bootstrap/tcp/tcp_root.h"

#include <atomic>
#include <condition_variable>
#include <cstring>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <poll.h>

#include "bootstrap/bootstrap.h"
#include "bootstrap/tcp/protocol.h"
#include "core/log.h"
#include "core/status.h"

namespace vccl {

namespace {

using tcpproto::RootStatus;

/* One root service: owns its sockets; runs on its own thread until the table went out or it gave up. */
class RootService {
public:
    RootService(sock::Fd listen_fd, const sock::SockAddr& addr, const uint8_t (&secret)[wire::kSecretBytes])
        : listen_fd_(std::move(listen_fd)), addr_(addr.to_string()) {
        memcpy(secret_, secret, sizeof(secret_));
    }

    void run(const std::atomic<bool>& stop);

private:
    /* A connection whose hello has not fully arrived yet. Reads are nonblocking and resumable, so a client
     * that sends half a hello (or nothing) cannot stall the others. */
    struct Pending {
        sock::Fd fd;
        std::string from;
        uint8_t buf[tcpproto::kHelloBytes];
        size_t got = 0;
    };

    void accept_all();
    /* Returns true when p is finished with (registered, rejected or gone) and can be dropped. */
    bool advance(Pending& p);
    void handle_hello(Pending& p);
    void reply(sock::Fd& fd, uint32_t status, const std::vector<uint8_t>* table, const Deadline& deadline);
    void reject(Pending& p, uint32_t status, uint32_t rank, uint32_t nranks);
    void finish_ok();
    void finish_timeout();

    sock::Fd listen_fd_;
    std::string addr_;
    uint8_t secret_[wire::kSecretBytes];
    std::list<Pending> pending_;
    uint32_t nranks_ = 0;           // set by the first valid hello
    std::vector<sock::Fd> rank_fd_; // registered connections, by rank
    std::vector<sock::SockAddr> table_;
    uint32_t registered_ = 0;
    Deadline deadline_ = bootstrap_deadline();
    CancelScope cancel_;
};

void RootService::run(const std::atomic<bool>& stop) {
    cancel_.flag = &stop;
    VCCL_INFO(kLogBootstrap, "root %s: serving, timeout %d s", addr_.c_str(), bootstrap_timeout_s());
    while (!stop.load(std::memory_order_acquire)) {
        std::vector<pollfd> pfds;
        pfds.push_back({listen_fd_.get(), POLLIN, 0});
        for (Pending& p : pending_) pfds.push_back({p.fd.get(), POLLIN, 0});
        int r = poll(pfds.data(), pfds.size(), deadline_.remaining_ms(sock::kPollSliceMs));
        if (r > 0) {
            size_t i = 1;
            for (auto it = pending_.begin(); it != pending_.end(); ++i) {
                if (pfds[i].revents != 0 && advance(*it)) {
                    it = pending_.erase(it);
                } else {
                    ++it;
                }
            }
            if (pfds[0].revents != 0) accept_all();
        }
        if (nranks_ != 0 && registered_ == nranks_) {
            finish_ok();
            return;
        }
        if (deadline_.expired()) {
            finish_timeout();
            return;
        }
    }
    VCCL_INFO(kLogBootstrap, "root %s: stopped at process exit with %u of %u ranks registered", addr_.c_str(), registered_,
              nranks_);
}

void RootService::accept_all() {
    for (;;) {
        sock::Fd fd;
        sock::SockAddr from;
        if (sock::accept_pending(listen_fd_.get(), &fd, &from) != vcclSuccess || !fd.valid()) return;
        Pending p;
        p.fd = std::move(fd);
        p.from = from.to_string();
        pending_.push_back(std::move(p));
    }
}

bool RootService::advance(Pending& p) {
    size_t n = 0;
    bool eof = false;
    if (sock::read_some(p.fd.get(), p.buf + p.got, sizeof(p.buf) - p.got, &n, &eof, "root: reading a hello") != vcclSuccess ||
        eof) {
        VCCL_INFO(kLogBootstrap, "root %s: connection from %s closed before a full hello", addr_.c_str(), p.from.c_str());
        return true;
    }
    p.got += n;
    if (p.got < sizeof(p.buf)) return false;
    handle_hello(p);
    return true;
}

void RootService::handle_hello(Pending& p) {
    wire::Reader r(p.buf);
    const uint32_t magic = r.u32();
    const uint32_t version = r.u32();
    uint8_t secret[wire::kSecretBytes];
    r.bytes(secret, sizeof(secret));
    const uint32_t rank = r.u32();
    const uint32_t nranks = r.u32();
    sock::SockAddr listen_addr;
    const bool addr_ok = r.addr(&listen_addr);

    // Whoever lacks the secret gets nothing back, not even an error code: it is not part of this job.
    if (magic != tcpproto::kHelloMagic || !wire::secrets_equal(secret, secret_)) {
        VCCL_WARN(kLogBootstrap, "root %s: dropped a connection from %s: %s", addr_.c_str(), p.from.c_str(),
                  magic != tcpproto::kHelloMagic ? "not a vccl bootstrap hello" : "wrong secret (not from this unique id)");
        return;
    }
    if (version != tcpproto::kVersion) return reject(p, tcpproto::kBadVersion, rank, nranks);
    if (nranks < 1 || nranks > tcpproto::kMaxRanks || rank >= nranks || !addr_ok) {
        return reject(p, tcpproto::kBadRank, rank, nranks);
    }
    if (nranks_ == 0) {
        nranks_ = nranks;
        rank_fd_.resize(nranks);
        table_.resize(nranks);
    } else if (nranks != nranks_) {
        return reject(p, tcpproto::kNranksMismatch, rank, nranks);
    }
    if (rank_fd_[rank].valid()) return reject(p, tcpproto::kDuplicateRank, rank, nranks);
    rank_fd_[rank] = std::move(p.fd);
    table_[rank] = listen_addr;
    ++registered_;
    // Progress resets the clock: the root waits up to the timeout for each next rank, not for all of them.
    deadline_ = bootstrap_deadline();
    VCCL_INFO(kLogBootstrap, "root %s: rank %u of %u registered from %s (listens on %s), %u/%u", addr_.c_str(), rank, nranks,
              p.from.c_str(), listen_addr.to_string().c_str(), registered_, nranks_);
}

void RootService::reply(sock::Fd& fd, uint32_t status, const std::vector<uint8_t>* table, const Deadline& deadline) {
    uint8_t head[tcpproto::kReplyBytes];
    wire::Writer w(head);
    w.u32(tcpproto::kTableMagic);
    w.u32(status);
    w.u32(nranks_);
    w.u32(registered_);
    vcclResult_t res = sock::send_all(fd.get(), head, sizeof(head), deadline, &cancel_, "root: replying to a rank");
    if (res == vcclSuccess && table != nullptr) {
        res = sock::send_all(fd.get(), table->data(), table->size(), deadline, &cancel_, "root: sending the address table");
    }
    if (res != vcclSuccess) {
        VCCL_WARN(kLogBootstrap, "root %s: could not reply to a rank: %s", addr_.c_str(), last_error_message());
    }
    fd.reset();
}

void RootService::reject(Pending& p, uint32_t status, uint32_t rank, uint32_t nranks) {
    VCCL_WARN(kLogBootstrap, "root %s: rejected rank %u (nranks %u) from %s: %s", addr_.c_str(), rank, nranks, p.from.c_str(),
              tcpproto::root_status_text(status));
    reply(p.fd, status, nullptr, Deadline::after_ms(1000));
}

void RootService::finish_ok() {
    std::vector<uint8_t> table(size_t(nranks_) * wire::kAddrBytes);
    wire::Writer w(table.data());
    for (const sock::SockAddr& a : table_) w.addr(a);
    const Deadline deadline = bootstrap_deadline();
    for (sock::Fd& fd : rank_fd_) reply(fd, tcpproto::kOk, &table, deadline);
    VCCL_INFO(kLogBootstrap, "root %s: all %u ranks registered, table sent", addr_.c_str(), nranks_);
}

void RootService::finish_timeout() {
    std::string missing;
    int listed = 0;
    for (uint32_t r = 0; r < nranks_ && listed < 16; ++r) {
        if (!rank_fd_[r].valid()) {
            missing += (listed++ ? "," : "") + std::to_string(r);
        }
    }
    VCCL_WARN(kLogBootstrap, "root %s: gave up after %d s without a new rank: %u of %u registered (missing: %s%s)",
              addr_.c_str(), bootstrap_timeout_s(), registered_, nranks_, nranks_ ? missing.c_str() : "all",
              nranks_ - registered_ > 16 ? ",..." : "");
    const Deadline deadline = Deadline::after_ms(1000);
    for (sock::Fd& fd : rank_fd_) {
        if (fd.valid()) reply(fd, tcpproto::kRootTimedOut, nullptr, deadline);
    }
}

/* All root threads of the process. Never destroyed: the atexit handler and late threads may use it while
 * static destructors run. */
struct Registry {
    struct Entry {
        std::thread thread;
        std::shared_ptr<std::atomic<bool>> done;
    };
    std::mutex mutex;
    std::list<Entry> entries;
    std::atomic<bool> stop{false};
};

Registry& registry() {
    static Registry* r = new Registry();
    return *r;
}

/* Joins threads that finished, so a long-lived process creating many ids does not accumulate them. */
void reap_locked(Registry& reg) {
    for (auto it = reg.entries.begin(); it != reg.entries.end();) {
        if (it->done->load(std::memory_order_acquire)) {
            it->thread.join();
            it = reg.entries.erase(it);
        } else {
            ++it;
        }
    }
}

/* At exit, stop every root thread and join it (they poll in short slices, so this takes < 100 ms): a thread
 * still running while the process tears down could touch freed state. */
void stop_all_at_exit() {
    Registry& reg = registry();
    reg.stop.store(true, std::memory_order_release);
    std::list<Registry::Entry> entries;
    {
        std::lock_guard<std::mutex> lock(reg.mutex);
        entries.swap(reg.entries);
    }
    for (Registry::Entry& e : entries) {
        if (e.thread.joinable()) e.thread.join();
    }
}

} // namespace

vcclResult_t tcp_root_start(const sock::SockAddr& addr, const uint8_t (&secret)[wire::kSecretBytes],
                            sock::SockAddr* listening) {
    sock::Fd fd;
    sock::SockAddr bound;
    VCCL_RETURN_IF_ERROR(sock::listen_on(addr, &fd, &bound));
    auto service = std::make_shared<RootService>(std::move(fd), bound, secret);
    auto done = std::make_shared<std::atomic<bool>>(false);

    static std::once_flag at_exit_once;
    std::call_once(at_exit_once, [] { std::atexit(stop_all_at_exit); });

    Registry& reg = registry();
    std::lock_guard<std::mutex> lock(reg.mutex);
    reap_locked(reg);
    try {
        std::thread thread([service, done, &reg] {
            try {
                service->run(reg.stop);
            } catch (const std::exception& e) {
                VCCL_WARN(kLogBootstrap, "root service failed: %s", e.what());
            }
            done->store(true, std::memory_order_release);
        });
        reg.entries.push_back({std::move(thread), done});
    } catch (const std::system_error& e) {
        return set_last_error(vcclSystemError, "bootstrap: cannot start the root service thread: %s", e.what());
    }
    *listening = bound;
    return vcclSuccess;
}

int tcp_root_running() {
    Registry& reg = registry();
    std::lock_guard<std::mutex> lock(reg.mutex);
    int n = 0;
    for (const Registry::Entry& e : reg.entries) {
        if (!e.done->load(std::memory_order_acquire)) ++n;
    }
    return n;
}

} // namespace vccl
