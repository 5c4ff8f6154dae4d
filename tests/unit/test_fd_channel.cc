/* SPDX-License-Identifier: BSD-3-Clause */
/* FdChannel (transport/cuda_ipc/fd_channel.h): file descriptors passed between ranks of a host over Unix datagram
 * sockets, as the direct path does for vcclMemAlloc (VMM) buffers. Two or three channels in one process
 * stand for the ranks. */
#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "transport/cuda_ipc/fd_channel.h"

using vccl::FdChannel;

namespace {

int open_fds() {
    int n = 0;
    DIR* d = opendir("/proc/self/fd");
    if (d == nullptr) return -1;
    while (readdir(d) != nullptr) ++n;
    closedir(d);
    return n;
}

/* A pipe whose read end is sent; what is written into the kept write end must come out of the received fd. */
struct Pipe {
    int fds[2] = {-1, -1};
    Pipe() { EXPECT_EQ(pipe(fds), 0); }
    ~Pipe() {
        for (int fd : fds) {
            if (fd >= 0) close(fd);
        }
    }
};

/* Offers a copy of fd (offer closes what make_fd returns). */
bool offer(FdChannel& c, int peer, uint64_t key, int fd) {
    return c.offer(peer, key, [fd] { return fd >= 0 ? dup(fd) : -1; });
}

bool same_pipe(const Pipe& p, int received, char byte) {
    if (write(p.fds[1], &byte, 1) != 1) return false;
    char got = 0;
    return read(received, &got, 1) == 1 && got == byte;
}

/* Ranks 0 and 1 that know each other. */
struct Pair {
    FdChannel a, b;
    Pair() {
        EXPECT_TRUE(a.open(0));
        EXPECT_TRUE(b.open(1));
        a.set_peers({a.address(), b.address()});
        b.set_peers({a.address(), b.address()});
    }
};

} // namespace

TEST(FdChannel, PassesADescriptorThatStillWorks) {
    Pair p;
    ASSERT_TRUE(p.a.is_open() && p.b.is_open());
    EXPECT_NE(p.a.address().name, p.b.address().name);
    Pipe pipe;
    ASSERT_TRUE(offer(p.a, 1, 42, pipe.fds[0]));
    std::string why;
    int fd = p.b.take(0, 42, 1000, &why);
    ASSERT_GE(fd, 0) << why;
    EXPECT_NE(fd, pipe.fds[0]); // a new descriptor of the same pipe
    EXPECT_TRUE(same_pipe(pipe, fd, 'x'));
    close(fd);
    EXPECT_EQ(p.b.kept(), 0u);
    EXPECT_EQ(p.b.rejected(), 0u);
}

TEST(FdChannel, KeepsDescriptorsForLaterTransfersAndGivesEachToItsKey) {
    Pair p;
    Pipe x, y;
    ASSERT_TRUE(offer(p.a, 1, 1, x.fds[0]));
    ASSERT_TRUE(offer(p.a, 1, 2, y.fds[0]));
    std::string why;
    int fy = p.b.take(0, 2, 1000, &why); // the later one first: the earlier one is kept
    ASSERT_GE(fy, 0) << why;
    EXPECT_EQ(p.b.kept(), 1u);
    int fx = p.b.take(0, 1, 1000, &why);
    ASSERT_GE(fx, 0) << why;
    EXPECT_TRUE(same_pipe(x, fx, 'a'));
    EXPECT_TRUE(same_pipe(y, fy, 'b'));
    close(fx);
    close(fy);
}

TEST(FdChannel, OfferedOnceUntilTheImporterForgetsIt) {
    Pair p;
    Pipe x, y;
    ASSERT_TRUE(offer(p.a, 1, 5, x.fds[0]));
    ASSERT_TRUE(offer(p.a, 1, 5, y.fds[0])); // already there: nothing sent
    EXPECT_EQ(p.a.offers(), 1u);
    std::string why;
    int f = p.b.take(0, 5, 1000, &why);
    ASSERT_GE(f, 0) << why;
    EXPECT_TRUE(same_pipe(x, f, 'c'));
    close(f);
    EXPECT_EQ(p.b.take(0, 5, 0, &why), -1) << "sent twice";
    // The importer lets go of it: the next offer sends again.
    p.b.forget(0, 5);
    ASSERT_TRUE(offer(p.a, 1, 5, y.fds[0]));
    f = p.b.take(0, 5, 1000, &why);
    ASSERT_GE(f, 0) << why;
    EXPECT_TRUE(same_pipe(y, f, 'd'));
    close(f);
    // Pruning drops the records of dead keys only.
    ASSERT_TRUE(offer(p.a, 1, 6, y.fds[0]));
    EXPECT_EQ(p.a.offers(), 2u);
    p.a.prune_offers([](uint64_t key) { return key == 6; });
    EXPECT_EQ(p.a.offers(), 1u);
}

TEST(FdChannel, AFullQueueMakesAnOfferFailUntilTheImporterDrains) {
    Pair p;
    Pipe pipe;
    uint64_t key = 0;
    // net.unix.max_dgram_qlen bounds the datagrams queued at the importer (10 by default).
    while (key < 100000 && offer(p.a, 1, key, pipe.fds[0])) ++key;
    ASSERT_LT(key, 100000u) << "the queue never filled";
    ASSERT_GT(key, 0u);
    const uint64_t failed = key;
    std::string why;
    int f = p.b.take(0, 0, 1000, &why); // drains the queue
    ASSERT_GE(f, 0) << why;
    close(f);
    ASSERT_TRUE(offer(p.a, 1, failed, pipe.fds[0])) << "not offered again after the failure";
    f = p.b.take(0, failed, 1000, &why);
    ASSERT_GE(f, 0) << why;
    EXPECT_TRUE(same_pipe(pipe, f, 'q'));
    close(f);
}

TEST(FdChannel, TakeOfSomethingNeverSentFailsAfterItsWaitWithAReason) {
    Pair p;
    std::string why;
    auto t0 = std::chrono::steady_clock::now();
    EXPECT_EQ(p.b.take(0, 99, 50, &why), -1);
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_GE(ms, 45);
    EXPECT_LT(ms, 2000);
    EXPECT_NE(why.find("rank 0"), std::string::npos) << why;
    EXPECT_NE(why.find("did not arrive"), std::string::npos) << why;
}

TEST(FdChannel, ADatagramWithoutTheRanksSecretIsDropped) {
    Pair p;
    // An impostor claims rank 0 but does not know rank 0's secret.
    FdChannel impostor;
    ASSERT_TRUE(impostor.open(0));
    impostor.set_peers({impostor.address(), p.b.address()});
    Pipe pipe;
    ASSERT_TRUE(offer(impostor, 1, 7, pipe.fds[0]));
    std::string why;
    EXPECT_EQ(p.b.take(0, 7, 50, &why), -1);
    EXPECT_EQ(p.b.rejected(), 1u);
    EXPECT_EQ(p.b.kept(), 0u);
    // The real rank 0 still gets through afterwards.
    ASSERT_TRUE(offer(p.a, 1, 7, pipe.fds[0]));
    int fd = p.b.take(0, 7, 1000, &why);
    ASSERT_GE(fd, 0) << why;
    close(fd);
}

TEST(FdChannel, ADatagramClaimingAnUnknownRankIsDropped) {
    FdChannel a, b;
    ASSERT_TRUE(a.open(5)); // rank 5 of a 2-rank view
    ASSERT_TRUE(b.open(1));
    a.set_peers({FdChannel::Address{}, b.address()});
    b.set_peers({a.address(), b.address()});
    Pipe pipe;
    ASSERT_TRUE(offer(a, 1, 1, pipe.fds[0]));
    std::string why;
    EXPECT_EQ(b.take(5, 1, 20, &why), -1);
    EXPECT_EQ(b.rejected(), 1u);
}

TEST(FdChannel, SendToAPeerWithoutASocketFails) {
    FdChannel a;
    ASSERT_TRUE(a.open(0));
    a.set_peers({a.address(), FdChannel::Address{}});
    Pipe pipe;
    EXPECT_FALSE(offer(a, 1, 1, pipe.fds[0]));  // published no socket
    EXPECT_FALSE(offer(a, 2, 1, pipe.fds[0]));  // no such rank
    EXPECT_FALSE(offer(a, -1, 1, pipe.fds[0]));
    EXPECT_FALSE(offer(a, 0, 1, -1));           // no descriptor
    FdChannel::Address dead;
    {
        FdChannel gone;
        ASSERT_TRUE(gone.open(1));
        dead = gone.address();
    }
    a.set_peers({a.address(), dead});
    EXPECT_FALSE(offer(a, 1, 1, pipe.fds[0])); // its socket is closed
}

/* Sets of one descriptor b keeps at most: bounded by count and by descriptors. */
size_t kept_bound() { return std::min(FdChannel::kMaxKept, FdChannel::max_kept_fds()); }

TEST(FdChannel, DescriptorsNeverTakenAreBoundedClosedAndOfferedAgain) {
    int before = open_fds();
    {
        Pair p;
        Pipe pipe;
        const uint64_t n = kept_bound() + 6;
        std::string why;
        for (uint64_t k = 0; k < n; ++k) {
            ASSERT_TRUE(offer(p.a, 1, k, pipe.fds[0])) << k;
            EXPECT_EQ(p.b.take(0, ~uint64_t(0), 0, &why), -1); // drains into what b keeps
        }
        EXPECT_EQ(p.b.kept(), kept_bound());
        EXPECT_EQ(p.b.take(0, 0, 0, &why), -1) << "the oldest should have been closed";
        // b told a to forget the ones it closed: a sends key 0 again.
        ASSERT_TRUE(offer(p.a, 1, 0, pipe.fds[0]));
        int f = p.b.take(0, 0, 1000, &why);
        ASSERT_GE(f, 0) << why;
        EXPECT_TRUE(same_pipe(pipe, f, 'z'));
        close(f);
        int last = p.b.take(0, n - 1, 0, &why);
        EXPECT_GE(last, 0) << why;
        if (last >= 0) close(last);
    }
    EXPECT_EQ(open_fds(), before) << "descriptors leaked";
}

/* A buffer made of several VMM allocations travels as one set: every descriptor with its value, in order. */
TEST(FdChannel, PassesASetOfDescriptorsWithTheirValuesInOrder) {
    int before = open_fds();
    {
        Pair p;
        Pipe x, y, z;
        const Pipe* pipes[3] = {&x, &y, &z};
        auto make = [&](FdChannel::FdSet* set) {
            for (int i = 0; i < 3; ++i) {
                set->fds.push_back(dup(pipes[i]->fds[0]));
                set->values.push_back(uint64_t(1000 + i));
            }
            return true;
        };
        ASSERT_TRUE(p.a.offer_set(1, 77, make));
        ASSERT_TRUE(p.a.offer_set(1, 77, make)); // offered already: nothing sent
        std::string why;
        FdChannel::FdSet got;
        ASSERT_TRUE(p.b.take_set(0, 77, 1000, &got, &why)) << why;
        ASSERT_EQ(got.fds.size(), 3u);
        ASSERT_EQ(got.values.size(), 3u);
        for (int i = 0; i < 3; ++i) {
            EXPECT_EQ(got.values[i], uint64_t(1000 + i));
            EXPECT_TRUE(same_pipe(*pipes[i], got.fds[i], char('a' + i))) << "descriptor " << i << " out of order";
        }
        got.close_all();
        FdChannel::FdSet again;
        EXPECT_FALSE(p.b.take_set(0, 77, 0, &again, &why)) << "sent twice";
        // A single offer arrives as a set of one with value 0; a set is not taken as a single descriptor.
        ASSERT_TRUE(offer(p.a, 1, 78, x.fds[0]));
        ASSERT_TRUE(p.b.take_set(0, 78, 1000, &got, &why)) << why;
        EXPECT_EQ(got.fds.size(), 1u);
        EXPECT_EQ(got.values, std::vector<uint64_t>{0});
        got.close_all();
        p.b.forget(0, 77);
        ASSERT_TRUE(p.a.offer_set(1, 77, make)); // forgotten: sent again
        EXPECT_EQ(p.b.take(0, 77, 1000, &why), -1);
        EXPECT_NE(why.find("several descriptors"), std::string::npos) << why;
        EXPECT_EQ(p.b.rejected(), 0u);
    }
    EXPECT_EQ(open_fds(), before) << "descriptors leaked";
}

TEST(FdChannel, RefusesSetsTooLargeOrMalformedAndLeaksNothing) {
    int before = open_fds();
    {
        Pair p;
        Pipe x;
        // More than a datagram may carry: not sent, and what make() opened is closed.
        EXPECT_FALSE(p.a.offer_set(1, 1, [&](FdChannel::FdSet* set) {
            for (size_t i = 0; i <= FdChannel::kMaxFds; ++i) {
                set->fds.push_back(dup(x.fds[0]));
                set->values.push_back(1);
            }
            return true;
        }));
        // A value missing for a descriptor, and an empty set: not sent either.
        EXPECT_FALSE(p.a.offer_set(1, 2, [&](FdChannel::FdSet* set) {
            set->fds.push_back(dup(x.fds[0]));
            return true;
        }));
        EXPECT_FALSE(p.a.offer_set(1, 3, [](FdChannel::FdSet*) { return true; }));
        EXPECT_FALSE(p.a.offer_set(1, 4, [&](FdChannel::FdSet* set) {
            set->fds.push_back(dup(x.fds[0])); // made, then given up: closed here
            set->values.push_back(1);
            return false;
        }));
        EXPECT_EQ(p.a.offers(), 0u);
        // The largest set goes through whole.
        ASSERT_TRUE(p.a.offer_set(1, 5, [&](FdChannel::FdSet* set) {
            for (size_t i = 0; i < FdChannel::kMaxFds; ++i) {
                set->fds.push_back(dup(x.fds[0]));
                set->values.push_back(i);
            }
            return true;
        }));
        std::string why;
        FdChannel::FdSet got;
        ASSERT_TRUE(p.b.take_set(0, 5, 1000, &got, &why)) << why;
        EXPECT_EQ(got.fds.size(), FdChannel::kMaxFds);
        EXPECT_EQ(got.values.back(), FdChannel::kMaxFds - 1);
        got.close_all();
    }
    EXPECT_EQ(open_fds(), before) << "descriptors leaked";
}

/* Sets never taken are bounded by descriptors too, not only by count: the oldest are closed and forgotten. */
TEST(FdChannel, SetsNeverTakenAreBoundedByDescriptors) {
    int before = open_fds();
    {
        Pair p;
        Pipe x;
        std::string why;
        const uint64_t sets = FdChannel::max_kept_fds() / FdChannel::kMaxFds + 2;
        for (uint64_t k = 0; k < sets; ++k) {
            ASSERT_TRUE(p.a.offer_set(1, k, [&](FdChannel::FdSet* set) {
                for (size_t i = 0; i < FdChannel::kMaxFds; ++i) {
                    set->fds.push_back(dup(x.fds[0]));
                    set->values.push_back(k);
                }
                return true;
            })) << k;
            FdChannel::FdSet none;
            EXPECT_FALSE(p.b.take_set(0, ~uint64_t(0), 0, &none, &why)); // drains into what b keeps
        }
        EXPECT_EQ(p.b.kept(), FdChannel::max_kept_fds() / FdChannel::kMaxFds);
        EXPECT_LE(open_fds() - before, int(FdChannel::max_kept_fds()) + 8);
        FdChannel::FdSet got;
        EXPECT_FALSE(p.b.take_set(0, 0, 0, &got, &why)) << "the oldest should have been closed";
        ASSERT_TRUE(p.b.take_set(0, sets - 1, 0, &got, &why)) << why;
        got.close_all();
    }
    EXPECT_EQ(open_fds(), before) << "descriptors leaked";
}

/* One batch may bring many sets before the first is taken: a group of receives into 100 buffers of another
 * allocator's VMM memory, the importer draining its queue in between (as it does for its own transfers). All
 * must still be there when their transfers come; with a bound of 64 sets the first 36 were closed and their
 * transfers failed after waiting a second. */
TEST(FdChannel, ABatchOfManySetsIsKeptUntilTaken) {
    int before = open_fds();
    {
        Pair p;
        Pipe pipe;
        constexpr uint64_t n = 100;
        static_assert(n <= 256, "within the smallest descriptor bound (max_kept_fds)");
        std::string why;
        for (uint64_t k = 0; k < n; ++k) {
            ASSERT_TRUE(offer(p.a, 1, k, pipe.fds[0])) << k;
            EXPECT_EQ(p.b.take(0, ~uint64_t(0), 0, &why), -1); // drains into what b keeps
        }
        EXPECT_EQ(p.b.kept(), n);
        for (uint64_t k = 0; k < n; ++k) {
            int f = p.b.take(0, k, 0, &why);
            ASSERT_GE(f, 0) << "set " << k << ": " << why;
            EXPECT_TRUE(same_pipe(pipe, f, char('a' + k % 26)));
            close(f);
        }
        EXPECT_EQ(p.b.kept(), 0u);
    }
    EXPECT_EQ(open_fds(), before) << "descriptors leaked";
}


/* The descriptor bound is for the whole process, but an idle channel's stale sets must not make a busy one close
 * its own (a framework has one communicator per parallel group): c holds as many never-taken descriptors as
 * the bound allows and then drains no more; b, under its share, keeps the 10 sets it is sent until taken. */
TEST(FdChannel, AnIdleChannelsSetsDoNotEvictAnothersWithinItsShare) {
    int before = open_fds();
    {
        FdChannel a, b, c;
        ASSERT_TRUE(a.open(0));
        ASSERT_TRUE(b.open(1));
        ASSERT_TRUE(c.open(2));
        for (FdChannel* ch : {&a, &b, &c}) ch->set_peers({a.address(), b.address(), c.address()});
        Pipe pipe;
        std::string why;
        const size_t per_set = 8, stale = FdChannel::max_kept_fds() / per_set; // within kMaxKept sets
        for (uint64_t k = 0; k < stale; ++k) {
            ASSERT_TRUE(a.offer_set(2, k, [&](FdChannel::FdSet* set) {
                for (size_t i = 0; i < per_set; ++i) {
                    set->fds.push_back(dup(pipe.fds[0]));
                    set->values.push_back(i);
                }
                return true;
            })) << k;
            FdChannel::FdSet none;
            EXPECT_FALSE(c.take_set(0, ~uint64_t(0), 0, &none, &why)); // drains into what c keeps
        }
        EXPECT_EQ(c.kept(), stale); // the whole bound
        const uint64_t n = 10;
        for (uint64_t k = 0; k < n; ++k) {
            ASSERT_TRUE(offer(a, 1, k, pipe.fds[0])) << k;
            EXPECT_EQ(b.take(0, ~uint64_t(0), 0, &why), -1);
        }
        EXPECT_EQ(b.kept(), n) << "b closed its own sets for c's";
        for (uint64_t k = 0; k < n; ++k) {
            int f = b.take(0, k, 0, &why);
            ASSERT_GE(f, 0) << "set " << k << ": " << why;
            close(f);
        }
    }
    EXPECT_EQ(open_fds(), before) << "descriptors leaked";
}
