/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Bootstrap tests: the unique id format, the TCP bootstrap with every rank a thread of this process, subset
 * bootstraps, the secret check, argument checks, abort and the timeout. Contents are always compared with
 * an independent formula of (source, destination, tag, index), never with what the code under test sent.
 */
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bootstrap/bootstrap.h"
#include "bootstrap/tcp/protocol.h"
#include "bootstrap/tcp/socket_util.h"
#include "bootstrap/tcp/tcp_bootstrap.h"
#include "bootstrap/tcp/tcp_root.h"
#include "bootstrap/tcp/unique_id.h"
#include "core/env.h"
#include "comm/comm.h"
#include "core/status.h"

using namespace vccl;

namespace {

uint8_t pattern(int src, int dst, uint64_t tag, size_t i) {
    return uint8_t(src * 131 + dst * 17 + tag * 7 + i * 3 + (i >> 8));
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

/* Sets VCCL_BOOTSTRAP_TIMEOUT for one test and restores the default afterwards. */
class TimeoutGuard {
public:
    explicit TimeoutGuard(int seconds) {
        setenv("VCCL_BOOTSTRAP_TIMEOUT", std::to_string(seconds).c_str(), 1);
        env::reload();
    }
    ~TimeoutGuard() {
        unsetenv("VCCL_BOOTSTRAP_TIMEOUT");
        env::reload();
    }
};

/* Runs `body` on n threads, each first joining the bootstrap of `id` as its rank. */
void run_ranks(int n, const vcclUniqueId& id, const std::function<void(Bootstrap&, int)>& body) {
    std::vector<std::thread> threads;
    for (int r = 0; r < n; ++r) {
        threads.emplace_back([&, r] {
            std::shared_ptr<Bootstrap> b;
            vcclResult_t res = tcp_bootstrap_create(id, r, n, &b);
            EXPECT_EQ(res, vcclSuccess) << "rank " << r << ": " << last_error_message();
            if (res != vcclSuccess) return;
            EXPECT_EQ(b->rank(), r);
            EXPECT_EQ(b->nranks(), n);
            body(*b, r);
        });
    }
    for (auto& t : threads) t.join();
}

/* Waits (bounded) until every root service thread finished. */
bool roots_finish_within(double seconds) {
    auto t0 = std::chrono::steady_clock::now();
    while (tcp_root_running() != 0) {
        if (seconds_since(t0) > seconds) return false;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return true;
}

/* Connects a raw socket (not a vccl rank) to addr. */
int raw_connect(const sock::SockAddr& addr) {
    sock::Fd fd;
    if (sock::connect_to(addr, Deadline::after_ms(2000), nullptr, "test client", &fd) != vcclSuccess) return -1;
    return fd.release();
}

/* True when the other end closed fd within `ms` (reads until EOF; data before it is ignored). */
bool closed_by_peer_within(int fd, int ms) {
    Deadline deadline = Deadline::after_ms(ms);
    char buf[256];
    while (!deadline.expired()) {
        pollfd p{fd, POLLIN, 0};
        if (poll(&p, 1, deadline.remaining_ms(100)) <= 0) continue;
        ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
        if (n == 0) return true;
        if (n < 0 && errno != EAGAIN && errno != EINTR) return true; // reset counts as closed
    }
    return false;
}

} // namespace

/* ------------------------------------------------------------------------------------------------ */
/* Unique id                                                                                        */

TEST(UniqueId, RoundTripIPv4AndIPv6) {
    for (const char* ip : {"10.1.2.3", "fd00::1:2"}) {
        uid::Info in;
        ASSERT_TRUE(sock::SockAddr::from_ip(ip, 40001, &in.root));
        for (size_t i = 0; i < sizeof(in.secret); ++i) in.secret[i] = uint8_t(0xa0 + i);
        vcclUniqueId id;
        memset(&id, 0x55, sizeof(id));
        uid::encode(in, &id);
        uid::Info out;
        ASSERT_EQ(uid::decode(id, &out), vcclSuccess) << last_error_message();
        EXPECT_EQ(out.root.to_string(), in.root.to_string());
        EXPECT_EQ(out.root.port(), 40001);
        EXPECT_EQ(memcmp(out.secret, in.secret, sizeof(in.secret)), 0);
    }
}

TEST(UniqueId, SecretsAreRandom) {
    vcclUniqueId a, b;
    ASSERT_EQ(tcp_unique_id_create(&a), vcclSuccess) << last_error_message();
    ASSERT_EQ(tcp_unique_id_create(&b), vcclSuccess) << last_error_message();
    uid::Info ia, ib;
    ASSERT_EQ(uid::decode(a, &ia), vcclSuccess);
    ASSERT_EQ(uid::decode(b, &ib), vcclSuccess);
    EXPECT_NE(memcmp(ia.secret, ib.secret, sizeof(ia.secret)), 0);
    EXPECT_NE(ia.root.port(), ib.root.port()); // two live services cannot share a port
    // Serve both so their root threads end: one rank each.
    for (const vcclUniqueId* id : {&a, &b}) {
        std::shared_ptr<Bootstrap> bs;
        EXPECT_EQ(tcp_bootstrap_create(*id, 0, 1, &bs), vcclSuccess) << last_error_message();
    }
}

TEST(UniqueId, EveryCorruptedByteIsRejected) {
    uid::Info in;
    ASSERT_TRUE(sock::SockAddr::from_ip("192.168.7.9", 5555, &in.root));
    for (size_t i = 0; i < sizeof(in.secret); ++i) in.secret[i] = uint8_t(i * 37);
    vcclUniqueId good;
    uid::encode(in, &good);
    for (size_t i = 0; i < VCCL_UNIQUE_ID_BYTES; ++i) {
        for (uint8_t flip : {uint8_t(0x01), uint8_t(0x80), uint8_t(0xff)}) {
            vcclUniqueId bad = good;
            bad.internal[i] = char(bad.internal[i] ^ flip);
            uid::Info out;
            clear_last_error();
            EXPECT_EQ(uid::decode(bad, &out), vcclInvalidArgument) << "byte " << i << " flip " << int(flip);
            EXPECT_NE(std::string(last_error_message()).find("not a vccl unique id"), std::string::npos)
                << last_error_message();
        }
    }
    vcclUniqueId zero;
    memset(&zero, 0, sizeof(zero));
    uid::Info out;
    EXPECT_EQ(uid::decode(zero, &out), vcclInvalidArgument);
    // And the rank-side entry point refuses it before touching the network.
    std::shared_ptr<Bootstrap> b;
    EXPECT_EQ(tcp_bootstrap_create(zero, 0, 1, &b), vcclInvalidArgument);
    EXPECT_FALSE(b);
}

TEST(SocketUtil, IfnameFilter) {
    EXPECT_TRUE(sock::ifname_matches("", "eth0"));
    EXPECT_TRUE(sock::ifname_matches("eth", "eth0"));
    EXPECT_TRUE(sock::ifname_matches("ib,eth", "eth1"));
    EXPECT_FALSE(sock::ifname_matches("ib", "eth0"));
    EXPECT_TRUE(sock::ifname_matches("=eth0", "eth0"));
    EXPECT_FALSE(sock::ifname_matches("=eth", "eth0"));
    EXPECT_FALSE(sock::ifname_matches("^docker,lo", "docker0"));
    EXPECT_FALSE(sock::ifname_matches("^docker,lo", "lo"));
    EXPECT_TRUE(sock::ifname_matches("^docker,lo", "eth0"));
    EXPECT_FALSE(sock::ifname_matches("^=eth0", "eth0"));
    EXPECT_TRUE(sock::ifname_matches("^=eth0", "eth01"));
}

TEST(SocketUtil, IfnameSelectsLoopbackWhenAsked) {
    setenv("VCCL_SOCKET_IFNAME", "=lo", 1);
    env::reload();
    sock::SockAddr a;
    std::string name;
    vcclResult_t res = sock::select_local_address(&a, &name);
    setenv("VCCL_SOCKET_IFNAME", "=no-such-interface0", 1);
    env::reload();
    sock::SockAddr b;
    vcclResult_t res_missing = sock::select_local_address(&b, &name);
    unsetenv("VCCL_SOCKET_IFNAME");
    env::reload();
    ASSERT_EQ(res, vcclSuccess) << last_error_message();
    EXPECT_EQ(a.to_string().rfind("127.", 0), 0u) << a.to_string();
    EXPECT_NE(res_missing, vcclSuccess);
}

/* ------------------------------------------------------------------------------------------------ */
/* TCP bootstrap, n ranks as threads                                                                */

class TcpRanks : public ::testing::TestWithParam<int> {};

TEST_P(TcpRanks, CollectivesAndShuffledPointToPoint) {
    const int n = GetParam();
    vcclUniqueId id;
    ASSERT_EQ(tcp_unique_id_create(&id), vcclSuccess) << last_error_message();
    std::atomic<int64_t> last_arrival_us{0};
    const auto t0 = std::chrono::steady_clock::now();
    auto us_now = [&] {
        return int64_t(std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0).count());
    };

    run_ranks(n, id, [&](Bootstrap& b, int me) {
        // allgather of an odd slot size
        const size_t slot = 37;
        std::vector<uint8_t> all(slot * n, 0xEE);
        for (size_t i = 0; i < slot; ++i) all[me * slot + i] = pattern(me, 0, 1, i);
        ASSERT_EQ(b.allgather(all.data(), slot), vcclSuccess) << last_error_message();
        for (int r = 0; r < n; ++r) {
            for (size_t i = 0; i < slot; ++i) ASSERT_EQ(all[r * slot + i], pattern(r, 0, 1, i)) << "slot " << r;
        }

        // broadcast from every root in turn
        for (int root = 0; root < n; ++root) {
            std::vector<uint8_t> buf(100, 0);
            if (me == root) {
                for (size_t i = 0; i < buf.size(); ++i) buf[i] = pattern(root, 0, 2, i);
            }
            ASSERT_EQ(b.broadcast(buf.data(), buf.size(), root), vcclSuccess) << last_error_message();
            for (size_t i = 0; i < buf.size(); ++i) ASSERT_EQ(buf[i], pattern(root, 0, 2, i)) << "root " << root;
        }

        // barrier: nobody leaves before the last rank (which arrives 30 ms * rank late) entered
        std::this_thread::sleep_for(std::chrono::milliseconds(30 * me));
        int64_t arrive = us_now();
        int64_t prev = last_arrival_us.load();
        while (prev < arrive && !last_arrival_us.compare_exchange_weak(prev, arrive)) {
        }
        ASSERT_EQ(b.barrier(), vcclSuccess) << last_error_message();
        EXPECT_GE(us_now(), last_arrival_us.load()) << "rank " << me << " left the barrier early";

        // point-to-point: to every rank (self included), 24 tags in a rank-specific shuffled order, sizes that
        // depend on the tag (0 included), and tag 1000 twice to check per-(source, tag) ordering.
        std::mt19937 rng(1234 + me);
        std::vector<uint64_t> tags;
        for (uint64_t t = 0; t < 24; ++t) tags.push_back(t * 0x10001ull + (t << 40));
        auto size_of = [](uint64_t tag) { return size_t((tag * 13) % 300); };
        std::vector<std::pair<int, uint64_t>> sends;
        for (int p = 0; p < n; ++p) {
            for (uint64_t t : tags) sends.push_back({p, t});
        }
        std::shuffle(sends.begin(), sends.end(), rng);
        for (auto& s : sends) {
            std::vector<uint8_t> msg(size_of(s.second));
            for (size_t i = 0; i < msg.size(); ++i) msg[i] = pattern(me, s.first, s.second, i);
            ASSERT_EQ(b.send(s.first, s.second, msg.data(), msg.size()), vcclSuccess) << last_error_message();
        }
        for (int p = 0; p < n; ++p) {
            for (int k = 0; k < 2; ++k) {
                uint8_t v = uint8_t(me * 10 + k);
                ASSERT_EQ(b.send(p, 1000, &v, 1), vcclSuccess) << last_error_message();
            }
        }
        std::shuffle(sends.begin(), sends.end(), rng);
        for (auto& s : sends) {
            const int src = s.first; // receive from the rank we sent to: the pattern is symmetric in shape
            std::vector<uint8_t> msg(size_of(s.second), 0xCD);
            ASSERT_EQ(b.recv(src, s.second, msg.data(), msg.size()), vcclSuccess) << last_error_message();
            for (size_t i = 0; i < msg.size(); ++i) {
                ASSERT_EQ(msg[i], pattern(src, me, s.second, i)) << "from " << src << " tag " << s.second;
            }
        }
        for (int p = n - 1; p >= 0; --p) {
            for (int k = 0; k < 2; ++k) {
                uint8_t v = 0;
                ASSERT_EQ(b.recv(p, 1000, &v, 1), vcclSuccess) << last_error_message();
                EXPECT_EQ(v, uint8_t(p * 10 + k)) << "order of equal tags from " << p;
            }
        }
        ASSERT_EQ(b.barrier(), vcclSuccess) << last_error_message();
    });
    EXPECT_TRUE(roots_finish_within(2.0));
}

INSTANTIATE_TEST_SUITE_P(Sizes, TcpRanks, ::testing::Values(1, 2, 3, 5, 8));

TEST(Tcp, LargeAllgatherDoesNotDeadlock) {
    // 8 MiB slots exceed socket buffers: every rank sends before it receives, so this only completes if a
    // blocked sender drains its own incoming connections.
    TimeoutGuard timeout(30); // a deadlock shows up as vcclTimeout, not as a hung test (TSan: slow copies)
    const int n = 4;
    const size_t slot = 8u << 20;
    vcclUniqueId id;
    ASSERT_EQ(tcp_unique_id_create(&id), vcclSuccess) << last_error_message();
    run_ranks(n, id, [&](Bootstrap& b, int me) {
        std::vector<uint8_t> all(slot * n, 0);
        for (size_t i = 0; i < slot; ++i) all[me * slot + i] = pattern(me, 1, 3, i);
        ASSERT_EQ(b.allgather(all.data(), slot), vcclSuccess) << last_error_message();
        for (int r = 0; r < n; ++r) {
            for (size_t i = 0; i < slot; i += 4093) ASSERT_EQ(all[r * slot + i], pattern(r, 1, 3, i));
            ASSERT_EQ(all[r * slot + slot - 1], pattern(r, 1, 3, slot - 1));
        }
    });
}

/* ------------------------------------------------------------------------------------------------ */
/* Subsets                                                                                          */

TEST(Subset, SplitAndNestedSplitKeepTrafficApart) {
    const int n = 6;
    vcclUniqueId id;
    ASSERT_EQ(tcp_unique_id_create(&id), vcclSuccess) << last_error_message();
    std::vector<std::thread> threads;
    std::vector<std::shared_ptr<Bootstrap>> parents(n);
    run_ranks(n, id, [&](Bootstrap& b, int me) { parents[me] = b.shared_from_this(); });
    for (int me = 0; me < n; ++me) ASSERT_TRUE(parents[me]);

    for (int me = 0; me < n; ++me) {
        threads.emplace_back([&, me] {
            Bootstrap& parent = *parents[me];
            // Evens in reverse order {4,2,0}, odds in order {1,3,5}. Same tags in both and in the parent.
            const bool even = me % 2 == 0;
            std::vector<int> members = even ? std::vector<int>{4, 2, 0} : std::vector<int>{1, 3, 5};
            const int new_rank = int(std::find(members.begin(), members.end(), me) - members.begin());
            std::shared_ptr<Bootstrap> sub;
            ASSERT_EQ(parent.split(members, new_rank, even ? 100 : 101, &sub), vcclSuccess) << last_error_message();
            ASSERT_EQ(sub->rank(), new_rank);
            ASSERT_EQ(sub->nranks(), 3);

            // Parent traffic with tag 7 to the right neighbour, posted before the subset traffic with tag 7.
            uint8_t pv = uint8_t(200 + me);
            ASSERT_EQ(parent.send((me + 1) % n, 7, &pv, 1), vcclSuccess);

            int slots[3] = {-1, -1, -1};
            slots[new_rank] = me;
            ASSERT_EQ(sub->allgather(slots, sizeof(int)), vcclSuccess) << last_error_message();
            for (int i = 0; i < 3; ++i) EXPECT_EQ(slots[i], members[i]) << "subset slot " << i;

            const int sub_right = (new_rank + 1) % 3, sub_left = (new_rank + 2) % 3;
            uint8_t sv = uint8_t(me);
            ASSERT_EQ(sub->send(sub_right, 7, &sv, 1), vcclSuccess);
            uint8_t got = 0xff;
            ASSERT_EQ(sub->recv(sub_left, 7, &got, 1), vcclSuccess) << last_error_message();
            EXPECT_EQ(got, uint8_t(members[sub_left]));

            // Nested: split the subset into {sub rank 0, 1} and {sub rank 2}; the nested ids are equal in both
            // groups on purpose (only the parent split ids differ).
            std::vector<int> nested_members = new_rank < 2 ? std::vector<int>{1, 0} : std::vector<int>{2};
            const int nested_rank = new_rank < 2 ? 1 - new_rank : 0;
            std::shared_ptr<Bootstrap> nested;
            ASSERT_EQ(sub->split(nested_members, nested_rank, 5, &nested), vcclSuccess) << last_error_message();
            int nslots[2] = {-1, -1};
            nslots[nested_rank] = me;
            ASSERT_EQ(nested->allgather(nslots, sizeof(int)), vcclSuccess) << last_error_message();
            for (int i = 0; i < nested->nranks(); ++i) {
                EXPECT_EQ(nslots[i], members[nested_members[i]]) << "nested slot " << i;
            }
            int root_val = nested_rank == 0 ? 1000 + me : 0;
            ASSERT_EQ(nested->broadcast(&root_val, sizeof(root_val), 0), vcclSuccess) << last_error_message();
            EXPECT_EQ(root_val, 1000 + members[nested_members[0]]);
            ASSERT_EQ(nested->barrier(), vcclSuccess);

            // The parent's own message is still there, untouched by the subset traffic.
            uint8_t pgot = 0;
            ASSERT_EQ(parent.recv((me + n - 1) % n, 7, &pgot, 1), vcclSuccess) << last_error_message();
            EXPECT_EQ(pgot, uint8_t(200 + (me + n - 1) % n));
        });
    }
    for (auto& t : threads) t.join();
}

TEST(Subset, ConcurrentSplitsShareOneParentFromSeveralThreads) {
    // Every rank runs three threads, each driving its own split of the same parent at the same time: the
    // parent is used concurrently and each split must see only its own messages.
    const int n = 4, splits = 3, rounds = 20;
    vcclUniqueId id;
    ASSERT_EQ(tcp_unique_id_create(&id), vcclSuccess) << last_error_message();
    std::vector<std::shared_ptr<Bootstrap>> parents(n);
    run_ranks(n, id, [&](Bootstrap& b, int me) { parents[me] = b.shared_from_this(); });
    std::vector<std::thread> threads;
    for (int me = 0; me < n; ++me) {
        for (int k = 0; k < splits; ++k) {
            threads.emplace_back([&, me, k] {
                ASSERT_TRUE(parents[me]);
                std::vector<int> members = {0, 1, 2, 3};
                std::shared_ptr<Bootstrap> sub;
                ASSERT_EQ(parents[me]->split(members, me, 50 + k, &sub), vcclSuccess) << last_error_message();
                for (int r = 0; r < rounds; ++r) {
                    int slots[4] = {0, 0, 0, 0};
                    slots[me] = me * 1000 + k * 100 + r;
                    ASSERT_EQ(sub->allgather(slots, sizeof(int)), vcclSuccess) << last_error_message();
                    for (int i = 0; i < n; ++i) ASSERT_EQ(slots[i], i * 1000 + k * 100 + r) << "split " << k;
                    int v = me * 1000 + k * 100 + r, got = -1;
                    ASSERT_EQ(sub->send((me + 1) % n, 9, &v, sizeof(v)), vcclSuccess);
                    ASSERT_EQ(sub->recv((me + n - 1) % n, 9, &got, sizeof(got)), vcclSuccess) << last_error_message();
                    ASSERT_EQ(got, ((me + n - 1) % n) * 1000 + k * 100 + r);
                }
            });
        }
    }
    for (auto& t : threads) t.join();
}

/* A process that exits while its root service still waits for ranks must exit cleanly. */
TEST(TcpRootDeathTest, ProcessExitWhileRootServes) {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    EXPECT_EXIT(
        {
            vcclUniqueId id;
            if (tcp_unique_id_create(&id) != vcclSuccess) _exit(3);
            if (tcp_root_running() != 1) _exit(4);
            std::exit(0);
        },
        ::testing::ExitedWithCode(0), "");
}

TEST(Subset, InvalidArguments) {
    vcclUniqueId id;
    ASSERT_EQ(tcp_unique_id_create(&id), vcclSuccess);
    std::shared_ptr<Bootstrap> b;
    ASSERT_EQ(tcp_bootstrap_create(id, 0, 1, &b), vcclSuccess) << last_error_message();
    EXPECT_EQ(make_subset_bootstrap(b, {}, 0, 1), nullptr);
    EXPECT_EQ(make_subset_bootstrap(b, {0, 0}, 0, 1), nullptr);
    EXPECT_EQ(make_subset_bootstrap(b, {1}, 0, 1), nullptr);  // out of range
    EXPECT_EQ(make_subset_bootstrap(b, {0}, 1, 1), nullptr);  // new_rank out of range
    EXPECT_EQ(make_subset_bootstrap(nullptr, {0}, 0, 1), nullptr);
    std::shared_ptr<Bootstrap> out;
    EXPECT_EQ(b->split({0, 0}, 0, 1, &out), vcclInvalidArgument);
    EXPECT_FALSE(out);
    ASSERT_EQ(b->split({0}, 0, 1, &out), vcclSuccess);
    // A single-rank subset still works end to end (self messages).
    uint32_t v = 0xabcdef01, w = 0;
    ASSERT_EQ(out->send(0, 3, &v, 4), vcclSuccess);
    ASSERT_EQ(out->recv(0, 3, &w, 4), vcclSuccess);
    EXPECT_EQ(w, v);
    EXPECT_EQ(out->send(1, 3, &v, 4), vcclInvalidArgument);
}

/* ------------------------------------------------------------------------------------------------ */
/* Secret check, arguments, abort, timeout                                                          */

TEST(Tcp, ClientsWithoutTheSecretAreRefused) {
    vcclUniqueId id;
    ASSERT_EQ(tcp_unique_id_create(&id), vcclSuccess) << last_error_message();
    uid::Info info;
    ASSERT_EQ(uid::decode(id, &info), vcclSuccess);

    // At the root: a hello with a wrong secret is closed; a silent client does not block anyone.
    int silent = raw_connect(info.root);
    ASSERT_GE(silent, 0);
    int intruder = raw_connect(info.root);
    ASSERT_GE(intruder, 0);
    uint8_t hello[tcpproto::kHelloBytes] = {0};
    wire::Writer w(hello);
    w.u32(tcpproto::kHelloMagic);
    w.u32(tcpproto::kVersion);
    uint8_t wrong[wire::kSecretBytes];
    memcpy(wrong, info.secret, sizeof(wrong));
    wrong[5] ^= 1;
    w.bytes(wrong, sizeof(wrong));
    w.u32(0);
    w.u32(3);
    w.addr(info.root);
    ASSERT_EQ(::send(intruder, hello, sizeof(hello), MSG_NOSIGNAL), ssize_t(sizeof(hello)));
    EXPECT_TRUE(closed_by_peer_within(intruder, 3000)) << "root kept a connection with a wrong secret";
    close(intruder);

    // The ranks still complete; then a client with a wrong secret talks to rank 0's listener.
    const int n = 3;
    std::vector<std::shared_ptr<Bootstrap>> ranks(n);
    run_ranks(n, id, [&](Bootstrap& b, int me) { ranks[me] = b.shared_from_this(); });
    close(silent);
    for (auto& r : ranks) ASSERT_TRUE(r);
    auto* tcp0 = dynamic_cast<TcpBootstrap*>(ranks[0].get());
    ASSERT_NE(tcp0, nullptr);
    int peer_intruder = raw_connect(tcp0->listen_address());
    ASSERT_GE(peer_intruder, 0);
    uint8_t pre[tcpproto::kPreambleBytes + tcpproto::kMsgHeaderBytes + 4] = {0};
    wire::Writer pw(pre);
    pw.u32(tcpproto::kPeerMagic);
    pw.u32(tcpproto::kVersion);
    pw.bytes(wrong, sizeof(wrong));
    pw.u32(1); // pretends to be rank 1
    pw.u32(0);
    pw.u64(42); // a message for tag 42 that must never be delivered
    pw.u64(4);
    pw.u32(0xdeadbeef);
    ASSERT_EQ(::send(peer_intruder, pre, sizeof(pre), MSG_NOSIGNAL), ssize_t(sizeof(pre)));

    std::vector<std::thread> threads;
    for (int me = 0; me < n; ++me) {
        threads.emplace_back([&, me] {
            int slots[3] = {0, 0, 0};
            slots[me] = 10 + me;
            ASSERT_EQ(ranks[me]->allgather(slots, sizeof(int)), vcclSuccess) << last_error_message();
            for (int r = 0; r < n; ++r) EXPECT_EQ(slots[r], 10 + r);
            if (me == 1) {
                uint32_t v = 0x600d;
                ASSERT_EQ(ranks[1]->send(0, 42, &v, 4), vcclSuccess);
            }
            if (me == 0) {
                uint32_t v = 0;
                ASSERT_EQ(ranks[0]->recv(1, 42, &v, 4), vcclSuccess) << last_error_message();
                EXPECT_EQ(v, 0x600du) << "a message from the intruder was delivered";
            }
        });
    }
    for (auto& t : threads) t.join();
    EXPECT_TRUE(closed_by_peer_within(peer_intruder, 3000)) << "rank 0 kept a connection with a wrong secret";
    close(peer_intruder);
    EXPECT_TRUE(roots_finish_within(2.0));
}

TEST(Tcp, BadArguments) {
    vcclUniqueId id;
    ASSERT_EQ(tcp_unique_id_create(&id), vcclSuccess);
    std::shared_ptr<Bootstrap> b;
    EXPECT_EQ(tcp_bootstrap_create(id, -1, 2, &b), vcclInvalidArgument);
    EXPECT_EQ(tcp_bootstrap_create(id, 2, 2, &b), vcclInvalidArgument);
    EXPECT_EQ(tcp_bootstrap_create(id, 0, 0, &b), vcclInvalidArgument);
    EXPECT_EQ(tcp_bootstrap_create(id, 0, -5, &b), vcclInvalidArgument);
    EXPECT_EQ(tcp_bootstrap_create(id, 0, 1, nullptr), vcclInvalidArgument);
    EXPECT_EQ(tcp_unique_id_create(nullptr), vcclInvalidArgument);
    EXPECT_FALSE(b);

    // Two ranks that disagree on nranks: the second is refused with a clear error.
    std::shared_ptr<Bootstrap> a, c;
    vcclResult_t ra = vcclInternalError, rc = vcclInternalError;
    {
        TimeoutGuard timeout(5);
        std::thread t([&] { ra = tcp_bootstrap_create(id, 0, 2, &a); });
        // Rank 0 must reach the root first (the root takes nranks from the first hello); generous for TSan.
        std::this_thread::sleep_for(std::chrono::milliseconds(500));
        rc = tcp_bootstrap_create(id, 1, 3, &c);
        std::string msg = last_error_message();
        EXPECT_EQ(rc, vcclInvalidUsage);
        EXPECT_NE(msg.find("nranks"), std::string::npos) << msg;
        ASSERT_EQ(tcp_bootstrap_create(id, 1, 2, &c), vcclSuccess) << last_error_message();
        t.join();
    }
    ASSERT_EQ(ra, vcclSuccess);
    uint32_t v = 1;
    EXPECT_EQ(a->send(2, 1, &v, 4), vcclInvalidArgument);
    EXPECT_EQ(a->recv(-1, 1, &v, 4), vcclInvalidArgument);
    EXPECT_EQ(a->send(1, 1, nullptr, 4), vcclInvalidArgument);
    EXPECT_EQ(a->broadcast(&v, 4, 2), vcclInvalidArgument);
    // Size mismatch between send and receive.
    ASSERT_EQ(a->send(1, 9, &v, 4), vcclSuccess);
    uint64_t big = 0;
    EXPECT_EQ(c->recv(0, 9, &big, 8), vcclInternalError);
}

TEST(Tcp, AbortUnblocksWaits) {
    vcclUniqueId id;
    ASSERT_EQ(tcp_unique_id_create(&id), vcclSuccess);
    std::vector<std::shared_ptr<Bootstrap>> ranks(2);
    run_ranks(2, id, [&](Bootstrap& b, int me) { ranks[me] = b.shared_from_this(); });
    ASSERT_TRUE(ranks[0] && ranks[1]);

    // A subset's abort ends its wait inside the parent, and leaves the parent usable.
    std::shared_ptr<Bootstrap> sub;
    ASSERT_EQ(ranks[0]->split({0, 1}, 0, 77, &sub), vcclSuccess);
    auto t0 = std::chrono::steady_clock::now();
    vcclResult_t res = vcclSuccess;
    std::thread waiter([&] {
        uint32_t v;
        res = sub->recv(1, 5, &v, 4);
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    sub->abort();
    waiter.join();
    EXPECT_EQ(res, vcclRemoteError);
    EXPECT_LT(seconds_since(t0), 1.5);
    uint32_t v = 3, w = 0;
    ASSERT_EQ(ranks[1]->send(0, 5, &v, 4), vcclSuccess);
    ASSERT_EQ(ranks[0]->recv(1, 5, &w, 4), vcclSuccess) << last_error_message();
    EXPECT_EQ(w, 3u);

    // The parent's abort ends its own waits and fails later calls.
    t0 = std::chrono::steady_clock::now();
    std::thread waiter2([&] {
        uint32_t x;
        res = ranks[0]->recv(1, 6, &x, 4);
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    ranks[0]->abort();
    waiter2.join();
    EXPECT_EQ(res, vcclRemoteError);
    EXPECT_LT(seconds_since(t0), 1.5);
    EXPECT_EQ(ranks[0]->send(1, 6, &v, 4), vcclRemoteError);
}

TEST(Tcp, RecvWithoutSenderTimesOut) {
    TimeoutGuard timeout(1);
    vcclUniqueId id;
    ASSERT_EQ(tcp_unique_id_create(&id), vcclSuccess);
    std::shared_ptr<Bootstrap> b;
    ASSERT_EQ(tcp_bootstrap_create(id, 0, 1, &b), vcclSuccess);
    auto t0 = std::chrono::steady_clock::now();
    uint32_t v;
    EXPECT_EQ(b->recv(0, 77, &v, 4), vcclTimeout);
    std::string msg = last_error_message();
    EXPECT_NE(msg.find("from rank 0"), std::string::npos) << msg;
    EXPECT_NE(msg.find("0x4d"), std::string::npos) << msg; // the tag
    double t = seconds_since(t0);
    EXPECT_GE(t, 0.9);
    EXPECT_LT(t, 2.5);
}

TEST(Tcp, MissingRankTimesOut) {
    TimeoutGuard timeout(2);
    vcclUniqueId id;
    ASSERT_EQ(tcp_unique_id_create(&id), vcclSuccess) << last_error_message();
    const auto t0 = std::chrono::steady_clock::now();
    vcclResult_t res[2] = {vcclSuccess, vcclSuccess};
    double elapsed[2] = {0, 0};
    std::string msg[2];
    std::vector<std::thread> threads;
    for (int r = 0; r < 2; ++r) {
        threads.emplace_back([&, r] {
            std::shared_ptr<Bootstrap> b;
            res[r] = tcp_bootstrap_create(id, r, 3, &b);
            elapsed[r] = seconds_since(t0);
            msg[r] = last_error_message();
            EXPECT_FALSE(b);
        });
    }
    for (auto& t : threads) t.join();
    for (int r = 0; r < 2; ++r) {
        EXPECT_EQ(res[r], vcclTimeout) << msg[r];
        EXPECT_LT(elapsed[r], 5.0);
        EXPECT_GE(elapsed[r], 1.5);
        EXPECT_NE(msg[r].find("rank " + std::to_string(r)), std::string::npos) << msg[r];
    }
    EXPECT_TRUE(roots_finish_within(3.0)) << tcp_root_running() << " root threads still running";
}
