/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * FailoverTransport over fake paths whose packets can be dropped silently (held and delivered after the
 * repair, as TCP retransmits) or whose endpoints can fail, two ranks driven from one thread. Scenarios found
 * by review (2026-11-24), each of which stalled traffic for as long as the fault lasted or left a working
 * path marked lost:
 *  - RESUME unanswered on a silently dead active path while the other path answers probes: the RESUME was
 *    sent again forever instead of switching (no traffic at all once the backup was a dead standby);
 *  - a failback into a rail that then drops everything: stalled for the whole fault;
 *  - a send left on a closed path failing after that path was reconnected marked it lost for good (and so
 *    did a control receive there ended by the close).
 * Spray mode (VCCL_MULTIPATH=spray) over paths with a rate each: the chunks split by measured speed, small
 * messages kept on the active path, a path lost in the middle of messages (no message lost, duplicated or
 * wrong), a lost path rejoining, a path at 1/10 speed kept in the spray set.
 * The transport's private state is read to set up timing and check the outcome, hence the define below.
 */
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#define private public
#include "transport/failover/failover_transport.h"
#undef private

namespace {

using namespace vccl;

struct FakePath;
struct FReq final : TransportRequest {
    enum { kPending, kDone, kFailed } state = kPending;
    bool recv = false, upto = false;
    int peer = -1;
    uint64_t tag = 0;
    char* buf = nullptr;
    size_t bytes = 0, received = 0;
    bool matched = false;  // its message has begun to arrive (UCX cannot cancel it any more)
    bool orphaned = false; // released while matched: freed when it ends
};
struct Msg {
    int from, to, path;
    uint64_t tag;
    std::vector<char> data;
    uint64_t at;
    FReq* sreq = nullptr; // completes when the message is delivered
};
struct Net {
    bool hole[2][2] = {{false, false}, {false, false}}; // [path][from]
    std::deque<Msg> wire;
    FakePath* ends[2][2] = {}; // [rank][path]
    uint64_t delivered[2] = {0, 0}, dropped[2] = {0, 0};
    std::deque<Msg> held[2][2];
    std::function<bool(const Msg&)> hold_if; // held like a hole, this message and what follows it
    // Receives whose message has begun to arrive (held) cannot be cancelled, as in UCX; only closing the endpoint
    // ends them. Harsher than UCX for small messages (UCX matches an eager message of one fragment, such as a
    // control message, only once it is whole), so the transport meets every receive kind ended by a close.
    bool matched_receives = true;
    // Spray cases: a path's speed (bytes per second, 0: unlimited), each direction its own queue, and the data
    // bytes handed to each path.
    double rate[2] = {0, 0};
    uint64_t busy_until[2][2] = {{0, 0}, {0, 0}}; // [path][from]
    uint64_t data_bytes[2] = {0, 0};
    void pump(uint64_t now);
};
Net net; // one network per test (reset by Pair)

struct FakePath final : Transport {
    int rank, path;
    bool failure = false, stale = false;
    std::deque<FReq*> posted;
    std::deque<Msg> unexpected;
    FakePath(int r, int p) : rank(r), path(p) {}
    const char* name() const override { return "fake"; }
    vcclResult_t isend(int peer, uint64_t tag, const void* buf, size_t bytes, MemType, bool,
                       TransportRequest** out) override {
        if (failure) return set_last_error(vcclRemoteError, "fake: path %d broken", path);
        if (stale && !net.hole[path][rank]) { // the peer closed its side: our send draws a reset
            failure = true;
            return set_last_error(vcclRemoteError, "fake: reset on path %d", path);
        }
        auto* r = new FReq();
        r->peer = peer;
        r->state = FReq::kPending; // completes at delivery
        uint64_t at = now_ns() + 20000;
        if (net.rate[path] > 0) {
            at = std::max(at, net.busy_until[path][rank]) + uint64_t(double(bytes) * 1e9 / net.rate[path]);
            net.busy_until[path][rank] = at;
        }
        if ((tag >> (failover::kIdBits + failover::kChunkBits)) == uint64_t(failover::Kind::kData)) {
            net.data_bytes[path] += bytes;
        }
        Msg m{rank, peer, path, tag, std::vector<char>((const char*)buf, (const char*)buf + bytes), at, r};
        net.wire.push_back(std::move(m));
        *out = r;
        return vcclSuccess;
    }
    vcclResult_t post(int peer, uint64_t tag, void* buf, size_t bytes, bool upto, TransportRequest** out) {
        if (failure) return set_last_error(vcclRemoteError, "fake: path %d broken", path);
        auto* r = new FReq();
        r->recv = true;
        r->upto = upto;
        r->peer = peer;
        r->tag = tag;
        r->buf = (char*)buf;
        r->bytes = bytes;
        for (auto it = unexpected.begin(); it != unexpected.end(); ++it) {
            if (it->from != peer || it->tag != tag) continue;
            fill(r, *it);
            unexpected.erase(it);
            *out = r;
            return vcclSuccess;
        }
        // A held message has begun to arrive (its first bytes came before the fault): this receive is matched.
        if (net.matched_receives) {
            for (const Msg& m : net.held[path][peer]) r->matched |= m.tag == tag;
        }
        posted.push_back(r);
        *out = r;
        return vcclSuccess;
    }
    static void fill(FReq* r, const Msg& m) {
        if (r->upto ? m.data.size() > r->bytes : m.data.size() != r->bytes) {
            r->state = FReq::kFailed;
            return;
        }
        memcpy(r->buf, m.data.data(), m.data.size());
        r->received = m.data.size();
        r->state = FReq::kDone;
    }
    void deliver(Msg& m) {
        for (auto it = posted.begin(); it != posted.end(); ++it) {
            if ((*it)->peer != m.from || (*it)->tag != m.tag) continue;
            FReq* r = *it;
            posted.erase(it);
            fill(r, m); // into the caller's buffer, even for a request the caller has released
            if (r->orphaned) delete r;
            return;
        }
        unexpected.push_back(std::move(m));
    }
    void mark_matched(const Msg& m) {
        for (FReq* r : posted) {
            if (r->peer == m.from && r->tag == m.tag) {
                r->matched = true;
                return;
            }
        }
    }
    vcclResult_t irecv(int peer, uint64_t tag, void* buf, size_t bytes, MemType, TransportRequest** out) override {
        return post(peer, tag, buf, bytes, false, out);
    }
    vcclResult_t irecv_upto(int peer, uint64_t tag, void* buf, size_t bytes, MemType, TransportRequest** out) override {
        return post(peer, tag, buf, bytes, true, out);
    }
    size_t received_bytes(TransportRequest* r) const override { return static_cast<FReq*>(r)->received; }
    vcclResult_t peer_status(int) override {
        return failure ? set_last_error(vcclRemoteError, "fake: path %d broken", path) : vcclSuccess;
    }
    void cancel(TransportRequest* b) override {
        auto* r = static_cast<FReq*>(b);
        if (r->matched) return; // as UCX: a receive whose message has begun to arrive cannot be cancelled
        for (auto it = posted.begin(); it != posted.end(); ++it) {
            if (*it == r) {
                posted.erase(it);
                r->state = FReq::kFailed;
                return;
            }
        }
    }
    void disconnect(int peer) override {
        failure = true;
        // Closing the endpoint ends the receives its messages had matched (with an error).
        for (auto it = posted.begin(); it != posted.end();) {
            FReq* r = *it;
            if (r->peer != peer || !r->matched) {
                ++it;
                continue;
            }
            it = posted.erase(it);
            r->state = FReq::kFailed;
            if (r->orphaned) delete r;
        }
        for (auto& q : net.held[path]) {
            for (auto& m : q) if (m.sreq) m.sreq->state = FReq::kFailed;
            q.clear(); // the connection is gone with what it held
        }
        FakePath* other = net.ends[peer][path];
        if (!net.hole[path][rank]) other->failure = true; // FIN reaches it
        else other->stale = true;
    }
    vcclResult_t reconnect(int) override {
        failure = false;
        stale = false;
        return vcclSuccess;
    }
    vcclResult_t test(TransportRequest* b) override {
        auto* r = static_cast<FReq*>(b);
        if (r->state == FReq::kDone) return vcclSuccess;
        if (r->state == FReq::kFailed) return set_last_error(vcclRemoteError, "fake: failed");
        if (failure) return set_last_error(vcclRemoteError, "fake: path %d broken", path);
        return vcclInProgress;
    }
    void progress() override { net.pump(now_ns()); }
    void release(TransportRequest* b) override {
        cancel(b);
        auto* r = static_cast<FReq*>(b);
        if (r->recv && std::find(posted.begin(), posted.end(), r) != posted.end()) {
            r->orphaned = true; // matched: still ours to end, as UCX keeps a released request it still owns
            return;
        }
        for (auto& m : net.wire) if (m.sreq == b) m.sreq = nullptr;
        for (auto& q : net.held[path]) for (auto& m : q) if (m.sreq == b) m.sreq = nullptr;
        delete r;
    }
    vcclResult_t close(Deadline) override { return vcclSuccess; }
};

void Net::pump(uint64_t now) {
    for (int p = 0; p < 2; ++p)
        for (int f = 0; f < 2; ++f)
            while (!hole[p][f] && !held[p][f].empty() && !(hold_if && hold_if(held[p][f].front()))) {
                Msg m = std::move(held[p][f].front());
                held[p][f].pop_front();
                delivered[p]++;
                if (m.sreq) m.sreq->state = FReq::kDone;
                ends[m.to][p]->deliver(m);
            }
    // In order per path and sender (times only grow there); a slow path does not hold up the other one.
    for (auto it = wire.begin(); it != wire.end();) {
        if (it->at > now) {
            ++it;
            continue;
        }
        Msg m = std::move(*it);
        it = wire.erase(it);
        if (hole[m.path][m.from] || !held[m.path][m.from].empty() || (hold_if && hold_if(m))) {
            // TCP: held, delivered after the repair
            if (matched_receives) ends[m.to][m.path]->mark_matched(m);
            held[m.path][m.from].push_back(std::move(m));
            continue;
        }
        delivered[m.path]++;
        if (m.sreq) m.sreq->state = FReq::kDone;
        ends[m.to][m.path]->deliver(m);
    }
}


/* Two ranks exchanging 3 MiB both ways, over and over; `fault(t)` changes the network at time t (seconds).
 * The loop never sleeps, so a stall is also measured in this thread's processor time (`longest_stall`):
 * on a crowded machine the wall-clock gap between completions (`longest_stall_wall`) also holds the time
 * the thread was not running, which is the machine's and not the protocol's. */
struct Outcome {
    int iterations = 0, wrong = 0;
    double longest_stall = 0, longest_stall_wall = 0, last_done = 0;
    std::string failed;
};

double thread_cpu_s() {
    timespec ts = {};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}

class Pair {
public:
    explicit Pair(bool failback, int peer_timeout_ms = 3000, bool spray = false) {
        net = Net();
        FailoverOptions fo;
        fo.failback = failback;
        fo.peer_timeout_ms = peer_timeout_ms;
        fo.spray = spray;
        TransportOptions to;
        for (int r = 0; r < 2; ++r) {
            auto p0 = std::make_unique<FakePath>(r, 0);
            auto p1 = std::make_unique<FakePath>(r, 1);
            net.ends[r][0] = p0.get();
            net.ends[r][1] = p1.get();
            ft[r].reset(new failover::FailoverTransport(std::move(p0), std::move(p1), fo, to, r, 2));
            ft[r]->start();
        }
    }
    failover::PeerState& state(int rank) { return *ft[rank]->peers_[size_t(1 - rank)]; }

    Outcome run(double seconds, const std::function<void(double)>& fault, size_t kBytes = 3u << 20) {
        std::vector<char> sbuf[2], rbuf[2];
        for (int r = 0; r < 2; ++r) {
            sbuf[r].resize(kBytes);
            rbuf[r].resize(kBytes);
        }
        Outcome o;
        uint64_t t0 = now_ns();
        auto elapsed = [&] { return double(now_ns() - t0) / 1e9; };
        TransportRequest* reqs[4] = {};
        auto post = [&]() -> bool {
            for (int r = 0; r < 2; ++r) {
                memset(sbuf[r].data(), (o.iterations * 2 + r) & 0xff, kBytes);
                memset(rbuf[r].data(), 0, kBytes);
            }
            for (int r = 0; r < 2; ++r) {
                if (ft[r]->irecv(1 - r, 7, rbuf[r].data(), kBytes, MemType::Host, &reqs[2 * r]) != vcclSuccess ||
                    ft[r]->isend(1 - r, 7, sbuf[r].data(), kBytes, MemType::Host, false, &reqs[2 * r + 1]) !=
                        vcclSuccess) {
                    o.failed = std::string("post: ") + last_error_message();
                    return false;
                }
            }
            return true;
        };
        if (!post()) return o;
        double cpu_at_last_done = thread_cpu_s();
        while (elapsed() < seconds) {
            double t = elapsed();
            fault(t);
            net.pump(now_ns());
            ft[0]->progress();
            ft[1]->progress();
            bool all = true;
            for (int i = 0; i < 4; ++i) {
                vcclResult_t st = ft[i / 2]->test(reqs[i]);
                if (st == vcclInProgress) {
                    all = false;
                } else if (st != vcclSuccess) {
                    o.failed = "request " + std::to_string(i) + " failed at " + std::to_string(t) + " s: " +
                               last_error_message();
                    return o;
                }
            }
            if (!all) continue;
            for (int r = 0; r < 2; ++r) {
                if (memcmp(rbuf[r].data(), sbuf[1 - r].data(), kBytes) != 0) o.wrong++;
            }
            for (int i = 0; i < 4; ++i) ft[i / 2]->release(reqs[i]);
            double cpu = thread_cpu_s();
            o.longest_stall = std::max(o.longest_stall, cpu - cpu_at_last_done);
            o.longest_stall_wall = std::max(o.longest_stall_wall, t - o.last_done);
            cpu_at_last_done = cpu;
            o.last_done = t;
            ++o.iterations;
            if (!post()) return o;
        }
        // A stall still going on.
        o.longest_stall = std::max(o.longest_stall, thread_cpu_s() - cpu_at_last_done);
        o.longest_stall_wall = std::max(o.longest_stall_wall, elapsed() - o.last_done);
        return o;
    }

    std::unique_ptr<failover::FailoverTransport> ft[2];
};

/* VCCL_FAILBACK=0, the backup rail silently dead from the start (a broken standby nobody checked); at 1 s
 * rank 1's primary endpoint fails while rail 0 drops packets for 100 ms. Both ranks move to the dead
 * backup and must come back to the primary, which works again. A RESUME sent again on the dead path forever
 * would leave every operation after the fault uncompleted. */
TEST(FailoverSim, UnansweredResumeOnDeadBackupMovesBack) {
    Pair pair(false);
    bool on = false, off = false;
    Outcome o = pair.run(3.0, [&](double t) {
        net.hole[1][0] = net.hole[1][1] = true;
        if (!on && t > 1.0) {
            on = true;
            net.hole[0][0] = net.hole[0][1] = true;
            net.ends[1][0]->failure = true;
        }
        if (on && !off && t > 1.1) {
            off = true;
            net.hole[0][0] = net.hole[0][1] = false;
        }
    });
    EXPECT_EQ(o.failed, "");
    EXPECT_EQ(o.wrong, 0);
    EXPECT_GT(o.iterations, 10);
    EXPECT_LT(o.longest_stall, 1.2) << "traffic stalled (last completion at " << o.last_done << " s, longest gap "
                                    << o.longest_stall_wall << " s of wall time)";
    EXPECT_EQ(pair.state(0).active, 0);
    EXPECT_EQ(pair.state(1).active, 0);
}

/* VCCL_FAILBACK=1: the primary's endpoints fail at 1 s, traffic moves to the working backup; when rank 0
 * fails back, rail 0 starts dropping everything for 2 s. The pair must leave the primary again within about
 * the failover timeout, not wait for the rail (which would stall traffic for the whole 2 s). */
TEST(FailoverSim, FailbackIntoDeadRailMovesAway) {
    Pair pair(true);
    bool on = false, hole = false;
    double hole_until = 1e9;
    Outcome o = pair.run(5.0, [&](double t) {
        if (!on && t > 1.0) {
            on = true;
            net.ends[0][0]->failure = net.ends[1][0]->failure = true;
        }
        failover::PeerState& p = pair.state(0);
        if (on && !hole && p.active == 0 && p.epoch >= 2) {
            hole = true;
            net.hole[0][0] = net.hole[0][1] = true;
            hole_until = t + 2.0;
        }
        if (hole && t > hole_until && net.hole[0][0]) net.hole[0][0] = net.hole[0][1] = false;
    });
    EXPECT_TRUE(hole) << "rank 0 did not fail back within the run";
    EXPECT_EQ(o.failed, "");
    EXPECT_EQ(o.wrong, 0);
    EXPECT_LT(o.longest_stall, 1.2) << "traffic stalled (last completion at " << o.last_done << " s, longest gap "
                                    << o.longest_stall_wall << " s of wall time)";
}

/* VCCL_FAILBACK=0: the primary's endpoints fail at 1 s (traffic moves to path 1 and stays); from 2 s to 3 s
 * rail 1 drops everything (a silence switch back to path 0 closes path 1), and the reconnect timer is made
 * due at every health check, so path 1 is reconnected at once. Afterwards no rank may hold a connected path
 * as lost: neither the sends failed by the close nor a control receive matched by an acknowledgement the hole
 * held, ended by the close and seen after the reconnect (under CPU load, 1 to 3 runs in 8 meet that case), may
 * mark the reconnected path lost for good, or a later fault of path 0 has nowhere to go. Then path 0 fails on
 * rank 0 for good: traffic must go on. */
TEST(FailoverSim, SendsFailedByACloseDoNotMarkTheReconnectedPathLost) {
    Pair pair(false);
    bool on = false, checked = false, last = false;
    bool lost_while_connected = false;
    std::string lost_text;
    Outcome o = pair.run(5.0, [&](double t) {
        if (!on && t > 1.0) {
            on = true;
            net.ends[0][0]->failure = net.ends[1][0]->failure = true;
        }
        if (t > 2.0 && t < 3.0) {
            net.hole[1][0] = net.hole[1][1] = true;
            pair.state(0).next_reconnect_ns = 0;
            pair.state(1).next_reconnect_ns = 0;
        } else if (t >= 3.0 && net.hole[1][0]) {
            net.hole[1][0] = net.hole[1][1] = false;
        }
        if (!checked && t > 3.8) {
            checked = true;
            for (int r = 0; r < 2; ++r) {
                for (int path = 0; path < 2; ++path) {
                    if (pair.state(r).path_lost[path] && !net.ends[r][path]->failure) {
                        lost_while_connected = true;
                        lost_text += "rank " + std::to_string(r) + " path " + std::to_string(path) + "; ";
                    }
                }
            }
        }
        if (checked && !last && t > 4.0) {
            last = true;
            net.ends[0][0]->failure = true;
            net.hole[0][0] = net.hole[0][1] = true;
        }
    });
    EXPECT_TRUE(checked);
    EXPECT_FALSE(lost_while_connected) << "connected but marked lost: " << lost_text;
    EXPECT_EQ(o.failed, "");
    EXPECT_EQ(o.wrong, 0);
    EXPECT_LT(o.longest_stall, 1.2) << "traffic stalled (last completion at " << o.last_done << " s, longest gap "
                                    << o.longest_stall_wall << " s of wall time)";
}

/* Both rails die while rank 1's 3 MiB message to rank 0 is arriving: its envelope came, its data had begun
 * (rank 0's chunk receive is matched, which UCX cannot cancel) and is held by the dead rail. After
 * VCCL_PEER_TIMEOUT_MS the receive fails; the caller then reuses its buffer, and the rails come back. Nothing
 * may write into that buffer any more: were the failed peer's paths left open, the matched receive would stay
 * UCX's and the rail's held data would land in the reused buffer. */
TEST(FailoverSim, FailedPeerWritesNothingAfterTheError) {
    Pair pair(true, 600);
    const size_t kBytes = 3u << 20;
    std::vector<char> sbuf(kBytes, char(0x5a)), rbuf(kBytes, 0);
    // Path 1 dead both ways, path 0 dead from rank 0 to rank 1; from rank 1 the envelope passes and the
    // data (with whatever follows it on that path) is held.
    net.hole[1][0] = net.hole[1][1] = true;
    net.hole[0][0] = true;
    net.hold_if = [](const Msg& m) {
        return (m.tag >> (failover::kIdBits + failover::kChunkBits)) == uint64_t(failover::Kind::kData);
    };
    TransportRequest *rreq = nullptr, *sreq = nullptr;
    ASSERT_EQ(pair.ft[0]->irecv(1, 9, rbuf.data(), kBytes, MemType::Host, &rreq), vcclSuccess);
    ASSERT_EQ(pair.ft[1]->isend(0, 9, sbuf.data(), kBytes, MemType::Host, false, &sreq), vcclSuccess);
    uint64_t t0 = now_ns();
    auto elapsed = [&] { return double(now_ns() - t0) / 1e9; };
    vcclResult_t st = vcclInProgress;
    while (st == vcclInProgress && elapsed() < 10.0) {
        net.pump(now_ns());
        pair.ft[0]->progress();
        pair.ft[1]->progress();
        st = pair.ft[0]->test(rreq);
    }
    ASSERT_NE(st, vcclInProgress) << "the receive did not fail within 10 s";
    EXPECT_NE(st, vcclSuccess) << "the receive completed though no data could arrive";
    bool matched = false;
    for (FReq* r : net.ends[0][0]->posted) matched |= r->matched;
    size_t held = net.held[0][1].size();
    pair.ft[0]->release(rreq);
    // The caller reuses the buffer; the rails are repaired.
    memset(rbuf.data(), 0x11, kBytes);
    net.hole[1][0] = net.hole[1][1] = net.hole[0][0] = false;
    net.hold_if = nullptr;
    uint64_t until = now_ns() + 300000000ull;
    while (now_ns() < until) {
        net.pump(now_ns());
        pair.ft[0]->progress();
        pair.ft[1]->progress();
    }
    size_t changed = 0;
    for (char c : rbuf) changed += c != 0x11;
    EXPECT_EQ(changed, 0u) << "bytes written into the buffer after its receive failed (data held: " << held
                           << " message(s), a matched receive left open: " << matched << ")";
    while (pair.ft[1]->test(sreq) == vcclInProgress && now_ns() < until + 5000000000ull) {
        net.pump(now_ns());
        pair.ft[1]->progress();
    }
    pair.ft[1]->release(sreq);
}

/* ---- spray (VCCL_MULTIPATH=spray) ---- */

/* Rank 0 streams `count` messages of `bytes` to rank 1, up to `window` in flight, each filled from its
 * sequence number; rank 1 checks every one against that pattern (a lost, duplicated or misplaced chunk or
 * message shows as wrong bytes or a count off). `fault(t)` changes the network at time t (seconds). */
struct Stream {
    int done = 0, wrong = 0;
    double seconds = 0;
    std::string failed;
};

Stream stream(Pair& pair, int count, size_t bytes, int window, double limit_s,
              const std::function<void(double)>& fault = [](double) {}) {
    Stream o;
    struct Slot {
        std::vector<char> sbuf, rbuf;
        TransportRequest *s = nullptr, *r = nullptr;
        int seq = -1;
    };
    std::vector<Slot> slots(static_cast<size_t>(window));
    auto fill = [&](std::vector<char>& b, int seq) {
        for (size_t i = 0; i < b.size(); i += 64) b[i] = char((seq * 131 + int(i / 64) * 7) & 0xff);
    };
    int posted = 0;
    auto post = [&](Slot& sl) -> bool {
        sl.sbuf.assign(bytes, 0);
        sl.rbuf.assign(bytes, 0x55);
        sl.seq = posted++;
        fill(sl.sbuf, sl.seq);
        if (pair.ft[1]->irecv(0, 3, sl.rbuf.data(), bytes, MemType::Host, &sl.r) != vcclSuccess ||
            pair.ft[0]->isend(1, 3, sl.sbuf.data(), bytes, MemType::Host, false, &sl.s) != vcclSuccess) {
            o.failed = std::string("post: ") + last_error_message();
            return false;
        }
        return true;
    };
    uint64_t t0 = now_ns();
    auto elapsed = [&] { return double(now_ns() - t0) / 1e9; };
    for (Slot& sl : slots) {
        if (posted < count && !post(sl)) return o;
    }
    size_t next = 0; // receives complete in posting order (one tag)
    while (o.done < count && elapsed() < limit_s) {
        fault(elapsed());
        net.pump(now_ns());
        pair.ft[0]->progress();
        pair.ft[1]->progress();
        Slot& sl = slots[next];
        vcclResult_t rs = pair.ft[1]->test(sl.r), ss = pair.ft[0]->test(sl.s);
        if ((rs != vcclSuccess && rs != vcclInProgress) || (ss != vcclSuccess && ss != vcclInProgress)) {
            o.failed = "message " + std::to_string(sl.seq) + " failed: " + last_error_message();
            return o;
        }
        if (rs != vcclSuccess || ss != vcclSuccess) continue;
        std::vector<char> want(bytes, 0);
        fill(want, sl.seq);
        if (memcmp(want.data(), sl.rbuf.data(), bytes) != 0) o.wrong++;
        pair.ft[0]->release(sl.s);
        pair.ft[1]->release(sl.r);
        o.done++;
        if (posted < count && !post(sl)) return o;
        next = (next + 1) % slots.size();
    }
    o.seconds = elapsed();
    return o;
}

/* Two paths, one 4x faster: the chunks are split by measured speed (about 1/5 on the slow path), both paths
 * stay in the spray set, and every message arrives intact. Equal paths share about evenly. */
TEST(FailoverSim, SpraySplitsBySpeed) {
    for (double slow : {0.25, 1.0}) {
        Pair pair(true, 3000, true);
        net.rate[0] = 50e6; // slow enough that the copies of this process do not set the pace
        net.rate[1] = 50e6 * slow;
        // The first messages are planned before either path was measured (an even split); the share is taken
        // from the bytes handed out after that, once 0.6 s of traffic measured both paths.
        uint64_t warm[2] = {0, 0};
        bool warmed = false;
        Stream o = stream(pair, 40, 4u << 20, 4, 20.0, [&](double t) {
            if (!warmed && t > 0.6) {
                warmed = true;
                warm[0] = net.data_bytes[0];
                warm[1] = net.data_bytes[1];
            }
        });
        EXPECT_EQ(o.failed, "");
        EXPECT_EQ(o.wrong, 0);
        EXPECT_EQ(o.done, 40);
        ASSERT_TRUE(warmed) << "the stream ended within 0.6 s";
        const double steady[2] = {double(net.data_bytes[0] - warm[0]), double(net.data_bytes[1] - warm[1])};
        ASSERT_GT(steady[0] + steady[1], 0.0);
        double share = steady[1] / (steady[0] + steady[1]);
        double want = slow / (1 + slow);
        EXPECT_NEAR(share, want, 0.1) << "path 1 speed x" << slow << ": share " << share << ", want " << want;
        EXPECT_EQ(pair.state(0).epoch, 0u) << "a path was switched off";
        EXPECT_TRUE(pair.state(0).spray_live[1]);
        // The paths add up: the busier path's time on the simulated wire (its steady bytes at its rate) is below
        // the fast path's time alone for them all; equal paths by at least half the second one's part. Wall-clock
        // time is left to contrib/bench-spray.sh: on a loaded machine this process's own copies set the pace.
        const double alone_s = (steady[0] + steady[1]) / net.rate[0];
        const double busiest_s = std::max(steady[0] / net.rate[0], steady[1] / net.rate[1]);
        EXPECT_LT(busiest_s, slow >= 1 ? alone_s / 1.5 : alone_s)
            << "the busier path is on the wire " << busiest_s << " s, the fast path alone would be " << alone_s << " s";
    }
}

/* Small messages (inline, or one chunk) are not sprayed: everything stays on the active path. */
TEST(FailoverSim, SpraySmallMessagesStayOnTheActivePath) {
    Pair pair(true, 3000, true);
    Stream a = stream(pair, 50, 64u << 10, 4, 10.0);
    Stream b = stream(pair, 20, 1u << 20, 2, 10.0);
    EXPECT_EQ(a.failed + b.failed, "");
    EXPECT_EQ(a.wrong + b.wrong, 0);
    EXPECT_EQ(net.data_bytes[1], 0u);
    EXPECT_GT(net.data_bytes[0], 0u);
}

/* A path lost in the middle of messages, by an endpoint error (path 1, not the active one) or silently (the
 * active path's rail drops everything): no message lost, none delivered twice or wrong, the stall short, the
 * lost path out of the spray set. */
TEST(FailoverSim, SprayPathLostMidMessage) {
    for (int silent = 0; silent < 2; ++silent) {
        Pair pair(false, 3000, true);
        net.rate[0] = net.rate[1] = 200e6;
        int lost = silent ? 0 : 1;
        bool on = false;
        Stream o = stream(pair, 60, 8u << 20, 4, 30.0, [&](double t) {
            if (!on && t > 0.5) {
                on = true;
                if (silent) {
                    net.hole[0][0] = net.hole[0][1] = true; // the active path: a switch
                } else {
                    net.ends[0][1]->failure = net.ends[1][1]->failure = true; // the other path: a respray
                }
            }
            if (on) {
                pair.state(0).next_reconnect_ns = pair.state(1).next_reconnect_ns = now_ns() + 1000000000ull;
            }
        });
        EXPECT_TRUE(on);
        EXPECT_EQ(o.failed, "") << "lost path " << lost;
        EXPECT_EQ(o.wrong, 0) << "lost path " << lost;
        EXPECT_EQ(o.done, 60) << "lost path " << lost;
        for (int r = 0; r < 2; ++r) {
            EXPECT_FALSE(pair.state(r).spray_live[lost]) << "rank " << r << " still sprays on lost path " << lost;
            EXPECT_EQ(pair.state(r).active, silent ? 1 : 0) << "rank " << r;
        }
        // 60 x 8 MiB at 200 MB/s on the one path left is 2.5 s; the fault costs about the failover timeout.
        EXPECT_LT(o.seconds, 6.0) << "lost path " << lost;
    }
}

/* A lost path comes back: it is reconnected, probed, and rejoins the spray set after the hold; chunks use it
 * again. */
TEST(FailoverSim, SprayLostPathRejoins) {
    Pair pair(false, 3000, true);
    net.rate[0] = net.rate[1] = 200e6;
    bool on = false, off = false;
    uint64_t bytes1_at_repair = 0;
    Stream o = stream(pair, 150, 8u << 20, 4, 30.0, [&](double t) {
        if (!on && t > 0.5) {
            on = true;
            net.ends[0][1]->failure = net.ends[1][1]->failure = true;
        }
        if (on && !off && t > 1.0) {
            off = true; // reconnect() repairs the endpoints
            bytes1_at_repair = net.data_bytes[1];
        }
        if (on && !off) pair.state(0).next_reconnect_ns = pair.state(1).next_reconnect_ns = now_ns() + 1000000000ull;
    });
    EXPECT_TRUE(off);
    EXPECT_EQ(o.failed, "");
    EXPECT_EQ(o.wrong, 0);
    EXPECT_EQ(o.done, 150);
    EXPECT_TRUE(pair.state(0).spray_live[1]) << "path 1 did not rejoin the spray set";
    EXPECT_GT(net.data_bytes[1] - bytes1_at_repair, uint64_t(50) << 20) << "no chunks on path 1 after it rejoined";
}

/* A path at 1/10 of the other's speed, alive: it gets about 1/11 of the chunks and is never switched off. */
TEST(FailoverSim, SpraySlowPathIsNotSwitchedOff) {
    Pair pair(true, 3000, true);
    net.rate[0] = 400e6;
    net.rate[1] = 40e6;
    Stream o = stream(pair, 60, 16u << 20, 2, 30.0);
    EXPECT_EQ(o.failed, "");
    EXPECT_EQ(o.wrong, 0);
    EXPECT_EQ(o.done, 60);
    for (int r = 0; r < 2; ++r) {
        EXPECT_EQ(pair.state(r).epoch, 0u) << "rank " << r << " switched";
        EXPECT_TRUE(pair.state(r).spray_live[1]);
    }
    double share = double(net.data_bytes[1]) / double(net.data_bytes[0] + net.data_bytes[1]);
    EXPECT_GT(share, 0.03);
    EXPECT_LT(share, 0.16);
}

/* The bidirectional fault scenarios of standby mode, sprayed: the primary's endpoints fail, then path 1
 * drops everything for a while; traffic goes on, nothing wrong. */
TEST(FailoverSim, SprayBothWaysThroughFaults) {
    Pair pair(true, 3000, true);
    bool a = false, b = false, c = false;
    Outcome o = pair.run(4.0, [&](double t) {
        if (!a && t > 0.5) {
            a = true;
            net.ends[0][0]->failure = net.ends[1][0]->failure = true;
        }
        if (!b && t > 2.0) {
            b = true;
            net.hole[1][0] = net.hole[1][1] = true;
        }
        if (!c && t > 2.3) {
            c = true;
            net.hole[1][0] = net.hole[1][1] = false;
        }
    }, 8u << 20);
    EXPECT_EQ(o.failed, "");
    EXPECT_EQ(o.wrong, 0);
    EXPECT_GT(o.iterations, 10);
    EXPECT_LT(o.longest_stall, 1.5) << "traffic stalled (last completion at " << o.last_done << " s)";
}

} // namespace
