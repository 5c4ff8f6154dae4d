/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Telemetry: window arithmetic on synthetic completions, the ring's seqlock protocol with a reader that
 * attaches and detaches while a writer thread runs, and Telemetry's per-path counters.
 */
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <string>
#include <thread>

#include "core/env.h"

#include "core/clock.h"
#include "telemetry/fast_clock.h"
#include "telemetry/latency.h"
#include "telemetry/ring.h"
#include "telemetry/telemetry.h"
#include "telemetry/window.h"

using namespace vccl::telemetry;

namespace {

/* Every record a telemetry object wrote to its ring (private memory), oldest first. */
std::vector<Record> all_records(const Telemetry& t) {
    RingReader reader;
    bool attached = reader.attach_memory(t.ring().base(), nullptr);
    EXPECT_TRUE(attached);
    if (!attached) return {};
    uint64_t next = 0;
    return reader.read(&next, nullptr);
}

constexpr uint64_t kMs = 1000000;

TEST(TelemetryWindow, EmptyIsZero) {
    Window w(8);
    EXPECT_EQ(w.count(), 0u);
    EXPECT_EQ(w.bandwidth(), 0.0);
}

TEST(TelemetryWindow, BackToBackTransfers) {
    Window w(8);
    // 1 MB every 1 ms, each posted when the previous completed: 1 GB/s.
    for (int i = 0; i < 5; ++i) w.add(uint64_t(i) * kMs, uint64_t(i + 1) * kMs, 1000000);
    EXPECT_EQ(w.count(), 5u);
    EXPECT_EQ(w.busy_ns(), 5 * kMs);
    EXPECT_DOUBLE_EQ(w.bandwidth(), 1e9);
}

TEST(TelemetryWindow, IdleGapsDoNotCount) {
    Window w(8);
    // 1 ms transfers separated by 9 ms of idle time: still 1 GB/s while busy.
    for (int i = 0; i < 4; ++i) w.add(uint64_t(i) * 10 * kMs, uint64_t(i) * 10 * kMs + kMs, 1000000);
    EXPECT_EQ(w.busy_ns(), 4 * kMs);
    EXPECT_DOUBLE_EQ(w.bandwidth(), 1e9);
}

TEST(TelemetryWindow, OverlappingTransfersCountWallTimeOnce) {
    Window w(8);
    // Four 1 MB transfers all posted at t=0, completing at 1, 2, 3, 4 ms (a queue): 4 MB in 4 ms.
    for (int i = 1; i <= 4; ++i) w.add(0, uint64_t(i) * kMs, 1000000);
    EXPECT_EQ(w.busy_ns(), 4 * kMs);
    EXPECT_DOUBLE_EQ(w.bandwidth(), 1e9);
}

TEST(TelemetryWindow, CompletionsSeenTogetherKeepTheirTime) {
    Window w(8);
    // 16 transfers of 1 MB queued on a 1 GB/s link, posted 1 ms apart, all seen complete in one progress call
    // at 16 ms (1 us apart): 16 MB in 16.015 ms, and the last 8 keep half of that time. (The old accounting
    // gave each but the first 1 us: 104,857 GB/s once the first had left the window.)
    for (int i = 0; i < 16; ++i) w.add(uint64_t(i) * kMs, 16 * kMs + uint64_t(i) * 1000, 1000000);
    EXPECT_EQ(w.count(), 8u);
    EXPECT_NEAR(double(w.busy_ns()), (16 * kMs + 15000) / 2.0, 8);
    EXPECT_NEAR(w.bandwidth(), 1e9, 1e7);
}

TEST(TelemetryWindow, QueueDeeperThanTheWindow) {
    Window w(8);
    // 32 transfers of 64 KB all posted at 0 (one collective's chunks), completing every 100 us: the link
    // moves 64 KB per 100 us. Each of the last 8 covers its own 100 us, not the whole queue.
    for (int i = 0; i < 32; ++i) w.add(0, uint64_t(i + 1) * 100000, 64000);
    EXPECT_EQ(w.busy_ns(), 800000u);
    EXPECT_DOUBLE_EQ(w.bandwidth(), 64000 / 100e-6);
}

TEST(TelemetryWindow, GroupSharesLeaveWithTheirEntries) {
    Window w(4);
    // A 4 ms transfer, then three seen with it (each 1 us later): the four share 4.003 ms.
    w.add(0, 4 * kMs, 1000000);
    for (int i = 1; i <= 3; ++i) w.add(0, 4 * kMs + uint64_t(i) * 1000, 1000000);
    EXPECT_EQ(w.busy_ns(), 4 * kMs + 3000);
    // Two more seen later on their own, 1 ms each: the two oldest group members (about 1 ms each) leave.
    w.add(4 * kMs + 3000, 5 * kMs + 3000, 1000000);
    w.add(5 * kMs + 3000, 6 * kMs + 3000, 1000000);
    EXPECT_NEAR(double(w.busy_ns()), 2 * (4 * kMs + 3000) / 4.0 + 2 * kMs, 4);
    EXPECT_NEAR(w.bandwidth(), 4e6 / 4.0015e-3, 1e3);
}

TEST(TelemetryWindow, SlidesOverTheLastW) {
    Window w(4);
    // Four slow completions (1 MB per 10 ms = 100 MB/s), then four fast ones (1 MB per 1 ms).
    uint64_t t = 0;
    for (int i = 0; i < 4; ++i, t += 10 * kMs) w.add(t, t + 10 * kMs, 1000000);
    EXPECT_NEAR(w.bandwidth(), 1e8, 1);
    for (int i = 0; i < 3; ++i, t += kMs) w.add(t, t + kMs, 1000000);
    // Window: one slow (10 ms), three fast (3 ms): 4 MB / 13 ms.
    EXPECT_EQ(w.count(), 4u);
    EXPECT_NEAR(w.bandwidth(), 4e6 / 13e-3, 1);
    w.add(t, t + kMs, 1000000);
    EXPECT_NEAR(w.bandwidth(), 1e9, 1);
    EXPECT_EQ(w.bytes(), 4000000u);
}

TEST(TelemetryWindow, SizeOneIsTheLastTransfer) {
    Window w(1);
    w.add(0, 2 * kMs, 1000000);
    w.add(5 * kMs, 6 * kMs, 3000000);
    EXPECT_DOUBLE_EQ(w.bandwidth(), 3e9);
}

TEST(TelemetryWindow, NonMonotonicDoneIsClamped) {
    Window w(8);
    w.add(0, 2 * kMs, 1000);
    w.add(0, 1 * kMs, 1000); // observed later but stamped earlier: contributes no busy time
    EXPECT_EQ(w.busy_ns(), 2 * kMs);
    EXPECT_EQ(w.bytes(), 2000u);
}

Record make_record(uint64_t i) {
    Record r;
    memset(&r, 0, sizeof(r));
    r.post_ns = i * 3;
    r.done_ns = i * 3 + 1;
    r.bytes = i ^ 0x5555;
    r.coll_seq = i;
    r.window_bw = double(i) * 2;
    r.peer = int32_t(i % 7);
    r.outstanding = uint32_t(i % 13);
    return r;
}

bool consistent(const Record& r) {
    uint64_t i = r.coll_seq;
    return r.post_ns == i * 3 && r.done_ns == i * 3 + 1 && r.bytes == (i ^ 0x5555) && r.window_bw == double(i) * 2 &&
           r.peer == int32_t(i % 7) && r.outstanding == uint32_t(i % 13);
}

/* The telemetry clock must track CLOCK_MONOTONIC closely (records of different ranks are compared) and
 * never go backwards, through its first (uncalibrated) millisecond and a re-anchoring. */
TEST(TelemetryClock, TracksMonotonicAndNeverGoesBack) {
    FastClock clock;
    printf("telemetry clock: %s\n", clock.uses_tsc() ? "TSC (clocksource tsc)" : "clock_gettime");
    uint64_t last = 0, worst = 0, readings = 0;
    uint64_t start = vccl::now_ns();
    while (vccl::now_ns() - start < 100 * kMs) {
        uint64_t before = vccl::now_ns();
        uint64_t t = clock.now_ns();
        uint64_t after = vccl::now_ns();
        ASSERT_GE(t, last) << "went backwards after " << readings << " readings";
        last = t;
        // Inside [before, after], give or take the mapping's error.
        uint64_t off = t < before ? before - t : t > after ? t - after : 0;
        if (off > worst) worst = off;
        ++readings;
    }
    printf("%llu readings over 100 ms, worst distance from clock_gettime %llu ns\n", (unsigned long long)readings,
           (unsigned long long)worst);
    EXPECT_LT(worst, 20000u) << "more than 20 us away from CLOCK_MONOTONIC";
    if (clock.uses_tsc()) {
        EXPECT_GT(clock.scale(), 0u) << "no scale measured after 100 ms";
    }
}

TEST(TelemetryRing, ReaderAttachesAndDetachesWhileWriterRuns) {
    RingInfo info;
    info.rank = 1;
    info.nranks = 4;
    info.comm_hash = 0x1234;
    info.comm_name = "ringtest";
    info.job = "unittest";
    info.capacity = 256;
    std::string name = "/vccl-unittest-" + std::to_string(getpid()) + "-ring";
    RingWriter writer;
    ASSERT_EQ(writer.create(info, name), vcclSuccess);
    std::string path = "/dev/shm" + name;

    const uint64_t total = 400000;
    std::atomic<bool> done{false};
    std::atomic<uint64_t> attached{0}, read_some{0};
    std::thread t([&] {
        PathStats s;
        memset(&s, 0, sizeof(s));
        s.used = 1;
        for (uint64_t i = 0; i < total; ++i) {
            if (i == total / 2) {
                // The whole run takes tens of milliseconds: on a crowded machine the reader might not get
                // the processor during it, or only long enough to be lapped between reading the write index
                // and the records. Halfway, wait (bounded) until it has attached twice and read records.
                auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
                while ((attached.load() < 2 || read_some.load() == 0) && std::chrono::steady_clock::now() < until) {
                    std::this_thread::yield();
                }
            }
            writer.append(make_record(i));
            if (i % 64 == 0) {
                s.peer = 2;
                s.bytes_sent = i;
                s.bytes_recv = i * 2; // readers check the pair is consistent
                writer.publish_path(2 * kMaxPathsPerPeer, s);
            }
        }
        done = true;
    });

    uint64_t attaches = 0, seen = 0, bad = 0, lost = 0, path_reads = 0;
    while (!done.load()) {
        RingReader reader;
        std::string why;
        ASSERT_TRUE(reader.attach(path, &why)) << why;
        attached.store(++attaches);
        EXPECT_EQ(reader.header().rank, 1);
        EXPECT_EQ(reader.header().comm_hash, 0x1234u);
        // Start anywhere: a late reader begins at the current write index, minus some history.
        uint64_t w = reader.write_index();
        uint64_t next = w > 100 ? w - 100 : 0;
        for (int k = 0; k < 5; ++k) {
            uint64_t before = next;
            std::vector<Record> recs = reader.read(&next, &lost);
            for (const Record& r : recs) {
                if (!consistent(r) || r.coll_seq < before) ++bad;
            }
            for (size_t j = 1; j < recs.size(); ++j) {
                if (recs[j].coll_seq <= recs[j - 1].coll_seq) ++bad; // in order
            }
            seen += recs.size();
            read_some.store(seen);
            for (const PathStats& s : reader.paths()) {
                ++path_reads;
                if (s.bytes_recv != s.bytes_sent * 2 || s.peer != 2) ++bad;
            }
        }
        reader.detach(); // and attach again on the next turn
    }
    t.join();
    EXPECT_EQ(bad, 0u);
    EXPECT_GT(attaches, 1u);
    EXPECT_GT(seen, 0u);

    // After the writer stops, a fresh reader sees exactly the last `capacity` records.
    RingReader reader;
    ASSERT_TRUE(reader.attach(path, nullptr));
    uint64_t next = 0, dropped = 0;
    std::vector<Record> recs = reader.read(&next, &dropped);
    ASSERT_EQ(recs.size(), 256u);
    EXPECT_EQ(dropped, total - 256);
    EXPECT_EQ(recs.front().coll_seq, total - 256);
    EXPECT_EQ(recs.back().coll_seq, total - 1);
    for (const Record& r : recs) EXPECT_TRUE(consistent(r));
    (void)path_reads;
}

TEST(TelemetryRing, RingFileIsPrivateAndRemoved) {
    RingInfo info;
    info.nranks = 2;
    std::string name = "/vccl-unittest-" + std::to_string(getpid()) + "-mode";
    std::string path = "/dev/shm" + name;
    {
        RingWriter writer;
        ASSERT_EQ(writer.create(info, name), vcclSuccess);
        struct stat st;
        ASSERT_EQ(stat(path.c_str(), &st), 0);
        EXPECT_EQ(st.st_mode & 0777, 0600u);
        RingWriter again; // O_EXCL: a second ring of the same name is refused
        EXPECT_NE(again.create(info, name), vcclSuccess);
    }
    EXPECT_NE(access(path.c_str(), F_OK), 0) << "ring not removed";
}

TEST(TelemetryRing, NotARing) {
    RingReader reader;
    std::string why;
    EXPECT_FALSE(reader.attach("/proc/self/status", &why));
    EXPECT_FALSE(why.empty());
}

/* Options for rank 0 of `nranks` with a private ring (no /dev/shm object), the rest at their defaults. */
Options private_options(int nranks, uint64_t comm_hash) {
    Options o;
    o.rank = 0;
    o.nranks = nranks;
    o.comm_hash = comm_hash;
    o.shm = false;
    return o;
}

TEST(Telemetry, CountsOutstandingBytesAndEvents) {
    Options o = private_options(3, 0xabc);
    o.window = 4;
    std::unique_ptr<Telemetry> t;
    ASSERT_EQ(Telemetry::create(o, &t), vcclSuccess);
    TransferTag tag;
    tag.coll = 1;
    tag.seq = 7;
    uint64_t p1 = t->on_post(1, 0, Dir::Send, 1000);
    uint64_t p2 = t->on_post(1, 0, Dir::Recv, 500);
    uint64_t p3 = t->on_post(2, 0, Dir::Send, 300);
    // Counters go to the ring at most once per millisecond per path: the second post to peer 1 is held back
    // (unless this thread was descheduled for 1 ms in between) until publish_held().
    std::vector<PathStats> s = t->snapshot();
    ASSERT_EQ(s.size(), 2u);
    EXPECT_GE(s[0].outstanding_reqs, 1u);
    t->publish_held();
    s = t->snapshot();
    ASSERT_EQ(s.size(), 2u);
    EXPECT_EQ(s[0].peer, 1);
    EXPECT_EQ(s[0].outstanding_reqs, 2u);
    EXPECT_EQ(s[0].outstanding_bytes, 1500u);
    t->on_complete(1, 0, Dir::Send, 1000, p1, tag, true);
    t->on_complete(1, 0, Dir::Recv, 500, p2, tag, true);
    t->on_complete(2, 0, Dir::Send, 300, p3, tag, false);
    t->path_event(1, 1, PathState::Standby);
    // What a transport does while it waits: publishes what was held back, at most once per millisecond.
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    t->tick();
    s = t->snapshot();
    ASSERT_EQ(s.size(), 3u);
    EXPECT_EQ(s[0].bytes_sent, 1000u);
    EXPECT_EQ(s[0].bytes_recv, 500u);
    EXPECT_EQ(s[0].outstanding_reqs, 0u);
    EXPECT_EQ(s[0].outstanding_bytes, 0u);
    EXPECT_GT(s[0].send_bw, 0.0);
    EXPECT_EQ(s[1].peer, 1);
    EXPECT_EQ(s[1].path, 1);
    EXPECT_EQ(s[1].state, uint32_t(PathState::Standby));
    EXPECT_EQ(s[2].peer, 2);
    EXPECT_EQ(s[2].failures, 1u);
    EXPECT_EQ(s[2].bytes_sent, 0u);

    std::vector<Record> recs = all_records(*t);
    ASSERT_EQ(recs.size(), 4u);
    EXPECT_EQ(recs[0].coll, 1);
    EXPECT_EQ(recs[0].coll_seq, 7u);
    EXPECT_EQ(recs[0].bytes, 1000u);
    EXPECT_EQ(recs[2].status, 1u);
    EXPECT_EQ(recs[3].kind, uint8_t(RecordKind::PathEvent));
    // Out-of-range peers and paths are ignored, not a crash.
    t->on_post(5, 0, Dir::Send, 1);
    t->path_event(0, 7, PathState::Down);
}

/* Small transfers are timed for one collective in `sample` (by sequence number) and one point-to-point
 * transfer in `sample` per path; all are counted; large ones are always timed. */
TEST(Telemetry, SamplesSmallTransfersCountsAll) {
    Options o = private_options(2, 0xdef);
    o.sample = 4;
    std::unique_ptr<Telemetry> t;
    ASSERT_EQ(Telemetry::create(o, &t), vcclSuccess);
    int timed = 0;
    for (uint64_t seq = 0; seq < 8; ++seq) { // 8 small allreduce transfers: seq 0 and 4 are timed
        TransferTag tag;
        tag.coll = 1;
        tag.seq = seq;
        uint64_t post = t->on_post(1, 0, Dir::Send, 64, &tag);
        timed += post != 0;
        t->on_complete(1, 0, Dir::Send, 64, post, tag, true);
    }
    EXPECT_EQ(timed, 2);
    TransferTag p2p; // point-to-point: every 4th on the path and direction, starting with the first
    for (int i = 0; i < 8; ++i) {
        uint64_t post = t->on_post(1, 0, Dir::Recv, 100, &p2p);
        EXPECT_EQ(post != 0, i % 4 == 0) << "p2p receive " << i;
        t->on_complete(1, 0, Dir::Recv, 100, post, p2p, true);
    }
    // An exchange posts a receive, then a send: each direction still gets its own one in 4 (with one counter
    // for both, the sends took every odd number and none was ever timed).
    int timed_sends = 0, timed_recvs = 0;
    for (int i = 0; i < 8; ++i) {
        uint64_t rpost = t->on_post(1, 0, Dir::Recv, 100, &p2p);
        uint64_t spost = t->on_post(1, 0, Dir::Send, 64, &p2p);
        timed_recvs += rpost != 0;
        timed_sends += spost != 0;
        t->on_complete(1, 0, Dir::Recv, 100, rpost, p2p, true);
        t->on_complete(1, 0, Dir::Send, 64, spost, p2p, true);
    }
    EXPECT_EQ(timed_recvs, 2);
    EXPECT_EQ(timed_sends, 2);
    TransferTag big;
    big.coll = 1;
    big.seq = 3; // not a sampled sequence number, but 4 MiB and more is always timed
    uint64_t post = t->on_post(1, 0, Dir::Send, 4 << 20, &big);
    EXPECT_NE(post, 0u);
    t->on_complete(1, 0, Dir::Send, 4 << 20, post, big, true);
    uint64_t untimed = t->on_post(1, 0, Dir::Send, 64, &big); // seq 3, small: counted only
    EXPECT_EQ(untimed, 0u);
    t->on_complete(1, 0, Dir::Send, 64, untimed, big, false);
    uint64_t just_under = t->on_post(1, 0, Dir::Send, (4 << 20) - 1, &big); // seq 3, just under 4 MiB: counted only
    EXPECT_EQ(just_under, 0u);
    t->on_complete(1, 0, Dir::Send, (4 << 20) - 1, just_under, big, true);
    t->publish_held();
    std::vector<PathStats> s = t->snapshot();
    ASSERT_EQ(s.size(), 1u);
    EXPECT_EQ(s[0].send_completions, 18u);
    EXPECT_EQ(s[0].bytes_sent, 16u * 64 + (4u << 20) + (4u << 20) - 1);
    EXPECT_EQ(s[0].recv_completions, 16u);
    EXPECT_EQ(s[0].bytes_recv, 1600u);
    EXPECT_EQ(s[0].failures, 1u);
    EXPECT_EQ(s[0].outstanding_reqs, 0u);
    EXPECT_EQ(s[0].outstanding_bytes, 0u);
    std::vector<Record> recs = all_records(*t);
    ASSERT_EQ(recs.size(), 2u + 2u + 4u + 1u); // timed ones only
    EXPECT_EQ(recs[0].coll_seq, 0u);
    EXPECT_EQ(recs[1].coll_seq, 4u);
    int send_recs = 0;
    for (size_t i = 4; i < 8; ++i) send_recs += recs[i].dir == uint8_t(Dir::Send);
    EXPECT_EQ(send_recs, 2);
    EXPECT_EQ(recs[8].bytes, uint64_t(4) << 20);
}

/* Untimed (sampled-out) completions read no clock, but the path's last completion time must still move: a path busy
 * with transfers under 4 MiB times one collective in 64, and lastCompletionNs (vccl-telemetry top's LAST) would
 * otherwise look stalled while data moves. Their publication's time stands for them. */
TEST(Telemetry, UntimedCompletionsMoveTheLastCompletionTime) {
    Options o = private_options(2, 0xabc);
    o.sample = 64;
    std::unique_ptr<Telemetry> t;
    ASSERT_EQ(Telemetry::create(o, &t), vcclSuccess);
    TransferTag tag;
    tag.coll = 1;
    tag.seq = 0; // timed
    uint64_t post = t->on_post(1, 0, Dir::Send, 1 << 20, &tag);
    ASSERT_NE(post, 0u);
    t->on_complete(1, 0, Dir::Send, 1 << 20, post, tag, true);
    t->publish_held();
    const uint64_t timed_done = t->snapshot()[0].last_done_ns;
    ASSERT_NE(timed_done, 0u);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    const uint64_t before = vccl::now_ns();
    tag.seq = 1; // not sampled: counted only
    post = t->on_post(1, 0, Dir::Send, 1 << 20, &tag);
    ASSERT_EQ(post, 0u);
    t->on_complete(1, 0, Dir::Send, 1 << 20, post, tag, true);
    t->publish_held();
    const uint64_t after = vccl::now_ns();
    std::vector<PathStats> s = t->snapshot();
    ASSERT_EQ(s.size(), 1u);
    EXPECT_EQ(s[0].send_completions, 2u);
    // The fast clock tracks CLOCK_MONOTONIC within about a microsecond (FastClock's test); 100 us of slack.
    EXPECT_GE(s[0].last_done_ns + 100000, before) << "timed completion at " << timed_done;
    EXPECT_LE(s[0].last_done_ns, after + 100000);
    // Nothing completed since: a later publication leaves it alone.
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    t->publish_held();
    EXPECT_EQ(t->snapshot()[0].last_done_ns, s[0].last_done_ns);
}

/* Run for real by tests/unit/telemetry_shm_full.sh, inside a private mount namespace whose /dev/shm is a 256 KiB
 * tmpfs: a 4 MiB ring cannot be reserved there. Before posix_fallocate the ring was created sparse, counted as
 * shared, and the first record beyond 256 KiB killed the process with SIGBUS. */
TEST(TelemetryShm, FullDevShmFallsBackToPrivateMemory) {
    const char* small = getenv("VCCL_TEST_SMALL_SHM");
    if (small == nullptr || std::string(small) != "1") {
        GTEST_SKIP() << "needs a small /dev/shm: run by tests/unit/telemetry_shm_full.sh";
    }
    Options o;
    o.rank = 0;
    o.nranks = 2;
    o.comm_hash = 0x5e11;
    o.shm = true;
    o.sample = 1;
    o.ring_records = 1u << 16;
    std::unique_ptr<Telemetry> t;
    ASSERT_EQ(Telemetry::create(o, &t), vcclSuccess);
    EXPECT_EQ(t->shm_path(), "") << "the ring claims /dev/shm, which has no room for it";
    TransferTag tag;
    for (int i = 0; i < 3 * (1 << 16); ++i) { // wraps the ring three times: every page written
        uint64_t post = t->on_post(1, 0, Dir::Send, 1 << 20, &tag);
        t->on_complete(1, 0, Dir::Send, 1 << 20, post, tag, true);
    }
    t->publish_held();
    std::vector<PathStats> s = t->snapshot();
    ASSERT_EQ(s.size(), 1u);
    EXPECT_EQ(s[0].send_completions, uint64_t(3 * (1 << 16)));
}

TEST(Telemetry, RingAndFileNames) {
    EXPECT_EQ(ring_name("123", 0xabcdef, 3), "vccl-123-0000000000abcdef-3");
    setenv("VCCL_TELEMETRY_JOB", "my job/1", 1);
    vccl::env::reload();
    EXPECT_EQ(job_name(), "my_job_1");
    unsetenv("VCCL_TELEMETRY_JOB");
    vccl::env::reload();
}


/* ---- ring version 3: send latency histogram, failovers by cause, per-collective counters ---- */

TEST(TelemetryLatency, BucketBoundsArePowersOfTwo) {
    EXPECT_EQ(latency_bucket(0), 0);
    EXPECT_EQ(latency_bucket(1023), 0);
    EXPECT_EQ(latency_bucket(1024), 1);
    EXPECT_EQ(latency_bucket(2047), 1);
    EXPECT_EQ(latency_bucket(2048), 2);
    EXPECT_EQ(latency_bucket(1000000), 10);               // 1 ms: [2^19, 2^20) ns
    EXPECT_EQ(latency_bucket((uint64_t(1) << 34) - 1), 24); // just under 17.2 s
    EXPECT_EQ(latency_bucket(uint64_t(1) << 34), kLatencyBuckets - 1);
    EXPECT_EQ(latency_bucket(UINT64_MAX), kLatencyBuckets - 1);
    for (int b = 0; b < kLatencyBuckets - 1; ++b) {
        EXPECT_EQ(latency_bucket(latency_bucket_upper_ns(b) - 1), b);
        EXPECT_EQ(latency_bucket(latency_bucket_upper_ns(b)), b + 1);
    }
}

TEST(TelemetryLatency, QuantilesAgreeWithSortedValuesToTheirBucket) {
    // Latencies from 500 ns to ~50 ms, log-uniform, from a fixed generator; the reference is the sorted list.
    std::vector<uint64_t> values;
    uint64_t x = 12345;
    for (int i = 0; i < 10007; ++i) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        double u = double(x >> 11) / double(1ull << 53);
        values.push_back(uint64_t(500.0 * std::pow(10.0, 5.0 * u)));
    }
    uint64_t buckets[kLatencyBuckets] = {};
    for (uint64_t v : values) buckets[latency_bucket(v)]++;
    std::sort(values.begin(), values.end());
    for (double q : {0.5, 0.9, 0.99, 0.999}) {
        uint64_t exact = values[size_t(std::ceil(q * double(values.size()))) - 1];
        uint64_t est = latency_quantile_ns(buckets, q);
        int b = latency_bucket(exact);
        uint64_t lo = b == 0 ? 0 : latency_bucket_upper_ns(b - 1), hi = latency_bucket_upper_ns(b);
        EXPECT_GE(est, lo) << "q " << q << " exact " << exact;
        EXPECT_LE(est, hi) << "q " << q << " exact " << exact;
    }
    uint64_t empty[kLatencyBuckets] = {};
    EXPECT_EQ(latency_quantile_ns(empty, 0.5), 0u);
    // One value in one bucket: the median interpolates to the bucket's middle.
    uint64_t one[kLatencyBuckets] = {};
    one[3] = 2; // [4096, 8192)
    EXPECT_EQ(latency_quantile_ns(one, 0.5), 6144u);
    EXPECT_EQ(latency_quantile_ns(one, 1.0), 8192u);
}

TEST(Telemetry, TimedSendsFillTheLatencyHistogram) {
    Options o = private_options(2, 0x1a7);
    o.sample = 1;
    std::unique_ptr<Telemetry> t;
    ASSERT_EQ(Telemetry::create(o, &t), vcclSuccess);
    Telemetry::PathW* p = t->path(1, 0);
    ASSERT_NE(p, nullptr);
    TransferTag tag{1, 0};
    // Known latencies: 3 of 1.5 us, 2 of 100 us, 1 of 2 s; post times in the past, completion now.
    const uint64_t lat[] = {1500, 1500, 1500, 100000, 100000, 2000000000ull};
    uint64_t sum = 0;
    for (uint64_t l : lat) {
        t->on_post(p, Dir::Send, 4096, &tag);
        uint64_t now = t->now_ns();
        t->on_complete(p, Dir::Send, 4096, now - l, tag, true, now);
        sum += l;
        tag.seq++;
    }
    // Receives and failed sends are not in the histogram.
    t->on_post(p, Dir::Recv, 64, &tag);
    t->on_complete(p, Dir::Recv, 64, t->now_ns() - 5000, tag, true, t->now_ns());
    t->on_post(p, Dir::Send, 64, &tag);
    t->on_complete(p, Dir::Send, 64, t->now_ns() - 5000, tag, false, t->now_ns());
    PathTotalsCopy c = t->totals(1, 0);
    EXPECT_EQ(c.latency_count(), 6u);
    EXPECT_EQ(c.latency[latency_bucket(1500)], 3u);
    EXPECT_EQ(c.latency[latency_bucket(100000)], 2u);
    EXPECT_EQ(c.latency[latency_bucket(2000000000ull)], 1u);
    EXPECT_EQ(c.latency_sum_ns, sum);
    EXPECT_EQ(t->totals(0, 0).latency_count(), 0u);
    EXPECT_EQ(t->totals(7, 0).latency_count(), 0u); // out of range: zero, no crash
}

TEST(Telemetry, SwitchesCountFailoversByCauseAndFailbacks) {
    Options o = private_options(3, 0xfa11);
    std::unique_ptr<Telemetry> t;
    ASSERT_EQ(Telemetry::create(o, &t), vcclSuccess);
    t->path_switch(2, 0, 1, SwitchCause::LinkDown, false);
    t->path_switch(2, 1, 0, SwitchCause::Other, true);
    t->path_switch(2, 0, 1, SwitchCause::Timeout, false);
    t->path_switch(2, 0, 1, SwitchCause::Timeout, false);
    t->count_failover(1, 0, SwitchCause::Unreachable);
    t->path_switch(9, 0, 1, SwitchCause::LinkDown, false); // no such peer: ignored
    PathTotalsCopy primary = t->totals(2, 0), backup = t->totals(2, 1);
    EXPECT_EQ(primary.failovers[int(SwitchCause::LinkDown)], 1u);
    EXPECT_EQ(primary.failovers[int(SwitchCause::Timeout)], 2u);
    EXPECT_EQ(primary.failbacks, 1u);
    EXPECT_EQ(backup.failovers[int(SwitchCause::Other)], 0u); // a failback is not a failover of the path left
    EXPECT_EQ(backup.failbacks, 0u);
    EXPECT_EQ(t->totals(1, 0).failovers[int(SwitchCause::Unreachable)], 1u);
    std::vector<PathStats> paths = t->snapshot();
    bool saw_backup_up = false;
    for (const PathStats& s : paths) {
        if (s.peer == 2 && s.path == 1) saw_backup_up = s.state == uint32_t(PathState::Up);
    }
    EXPECT_TRUE(saw_backup_up);
    EXPECT_STREQ(switch_cause_name(int(SwitchCause::LinkDown)), "link_down");
    EXPECT_STREQ(switch_cause_name(99), "other");
}

TEST(Telemetry, CollectivesAreCountedUnlessPaused) {
    Options o = private_options(2, 0xc011);
    std::unique_ptr<Telemetry> t;
    ASSERT_EQ(Telemetry::create(o, &t), vcclSuccess);
    t->on_collective(1, 1, 4096, 1000);
    t->on_collective(1, 1, 8, 0);
    t->on_collective(1, 0, 0, 500); // a staged piece's time
    t->on_collective(4, 1, 100, 7);
    t->pause_collectives(true);
    t->on_collective(1, 1, 1 << 20, 1);
    t->pause_collectives(false);
    t->on_collective(kCollKinds, 1, 1, 1); // out of range: ignored
    RingReader reader;
    ASSERT_TRUE(reader.attach_memory(t->ring().base(), nullptr));
    CollTotalsCopy ar = reader.coll_totals(1), ag = reader.coll_totals(4), none = reader.coll_totals(2);
    EXPECT_EQ(ar.calls, 2u);
    EXPECT_EQ(ar.bytes, 4104u);
    EXPECT_EQ(ar.time_ns, 1500u);
    EXPECT_EQ(ag.calls, 1u);
    EXPECT_EQ(ag.bytes, 100u);
    EXPECT_EQ(none.calls, 0u);
    EXPECT_EQ(reader.coll_totals(-1).calls, 0u);
}

TEST(TelemetryRing, APositionPastTheEndReadsTheRingFromItsOldestRecord) {
    // Found by fuzz_telemetry_ring: a position past the write index (a ring replaced by a younger one under the
    // same name) made end - position wrap and reserve() throw.
    RingWriter w;
    RingInfo info;
    info.capacity = 16;
    ASSERT_EQ(w.create(info, ""), vcclSuccess);
    for (int i = 0; i < 20; ++i) {
        Record r;
        memset(&r, 0, sizeof(r));
        r.bytes = uint64_t(i);
        w.append(r);
    }
    RingReader reader;
    ASSERT_TRUE(reader.attach_memory(w.base(), nullptr));
    uint64_t next = 1000, lost = 0;
    std::vector<Record> got = reader.read(&next, &lost);
    ASSERT_EQ(got.size(), 16u);
    EXPECT_EQ(got.front().bytes, 4u);
    EXPECT_EQ(got.back().bytes, 19u);
    EXPECT_EQ(next, 20u);
    next = UINT64_MAX;
    EXPECT_EQ(reader.read(&next, &lost).size(), 16u);
}

TEST(TelemetryRing, OtherVersionsAndDamagedHeadersAreRefusedByName) {
    RingWriter w;
    RingInfo info;
    info.nranks = 4;
    info.capacity = 16;
    ASSERT_EQ(w.create(info, ""), vcclSuccess);
    const size_t bytes = ring_bytes(w.npaths(), 16);
    std::vector<char> copy(static_cast<const char*>(w.base()), static_cast<const char*>(w.base()) + bytes);
    Header* h = reinterpret_cast<Header*>(copy.data());
    RingReader reader;
    std::string why;
    ASSERT_TRUE(reader.attach_memory(copy.data(), &why)) << why;
    h->version = kVersion + 1;
    EXPECT_FALSE(reader.attach_memory(copy.data(), &why));
    EXPECT_NE(why.find("is newer"), std::string::npos) << why;
    h->version = kVersion - 1;
    EXPECT_FALSE(reader.attach_memory(copy.data(), &why));
    EXPECT_NE(why.find("is older"), std::string::npos) << why;
    h->version = kVersion;
    h->npaths = 1u << 30; // would index far past the mapping
    EXPECT_FALSE(reader.attach_memory(copy.data(), &why));
    EXPECT_NE(why.find("inconsistent"), std::string::npos) << why;
    h->npaths = w.npaths();
    h->capacity = 0; // would divide by zero
    EXPECT_FALSE(reader.attach_memory(copy.data(), &why));
    h->capacity = 16;
    h->rank = 4;
    EXPECT_FALSE(reader.attach_memory(copy.data(), &why));
    h->rank = 0;
    EXPECT_TRUE(reader.attach_memory(copy.data(), &why)) << why;
}

} // namespace
