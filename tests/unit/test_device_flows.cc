/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Telemetry of the device path (telemetry/device_flows.h) against fake note words: which transfers are timed, that a
 * timed one stays outstanding until the stream's note for it (or a later one) is read, that kernel calls are
 * sampled at every size and count each peer's bytes, that a transfer given up (or one with a peer that gave up)
 * counts as a failure, that a record seen done waits for a read of the FAIL words that started after it (a peer
 * that gave up releases this rank's waits without data), and that nothing is recorded while paused. Part of
 * tests/unit/test_telemetry (the stream side runs on a GPU: GpuTelemetry in tests/gpu).
 */
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "telemetry/device_flows.h"
#include "core/clock.h"
#include "telemetry/telemetry.h"

using namespace vccl;
using namespace vccl::telemetry;

namespace {

struct Fixture {
    std::unique_ptr<Telemetry> telemetry;
    std::vector<uint32_t> words;
    /* What the fake reads of the FAIL words said (IpcP2p::fail_state): by default a read after everything
     * vouches for every peer, so the tests that are not about failures see records complete at once. */
    std::vector<uint64_t> clear_ns;
    std::vector<bool> failed;
    std::unique_ptr<DeviceFlows> flows;

    explicit Fixture(int nranks, int sample = 64) {
        Options o;
        o.rank = 0;
        o.nranks = nranks;
        o.comm_hash = 0xd1;
        o.shm = false;
        o.sample = sample;
        EXPECT_EQ(Telemetry::create(o, &telemetry), vcclSuccess);
        words.assign(size_t(2 * nranks + 1), 0);
        clear_ns.assign(size_t(nranks), UINT64_MAX);
        failed.assign(size_t(nranks), false);
        flows = std::make_unique<DeviceFlows>(
            telemetry.get(), nranks, [this](int w) { return words[size_t(w)]; },
            [this](int peer, uint64_t* clear, bool* f) {
                *clear = clear_ns[size_t(peer)];
                *f = failed[size_t(peer)];
            });
    }
    /* A read of the FAIL words starts now (later than every poll so far) and lands: `peer`'s word unwritten. */
    void clean_read(int peer) {
        std::this_thread::sleep_for(std::chrono::microseconds(2)); // a later time than the last poll's, surely
        clear_ns[size_t(peer)] = now_ns();
    }
    /* The device path's counters of `peer`, published now; all zero when it has none. */
    PathStats device(int peer) {
        telemetry->publish_held();
        for (const PathStats& s : telemetry->snapshot()) {
            if (s.peer == peer && s.path == kDevicePath) return s;
        }
        return PathStats{};
    }
};

TEST(DeviceFlows, TimedTransfersStayOutstandingUntilTheirNoteIsWritten) {
    Fixture f(3, 1); // every transfer timed
    const uint64_t mib = 1 << 20;
    int send_word = -1, recv_word = -1, second_word = -1;
    const uint32_t s1 = f.flows->posted(1, Dir::Send, mib, &send_word);
    const uint32_t r1 = f.flows->posted(1, Dir::Recv, mib, &recv_word);
    const uint32_t s2 = f.flows->posted(1, Dir::Send, 2 * mib, &second_word);
    EXPECT_EQ(send_word, DeviceFlows::send_word(1));
    EXPECT_EQ(recv_word, DeviceFlows::recv_word(1));
    EXPECT_EQ(second_word, send_word);
    EXPECT_EQ(s1, 1u);
    EXPECT_EQ(r1, 1u);
    EXPECT_EQ(s2, 2u);
    PathStats s = f.device(1);
    EXPECT_EQ(s.outstanding_reqs, 3u);
    EXPECT_EQ(s.outstanding_bytes, 4 * mib);
    EXPECT_EQ(s.bytes_sent, 0u);

    EXPECT_TRUE(f.flows->poll()); // no note yet
    EXPECT_EQ(f.device(1).outstanding_reqs, 3u);

    f.words[size_t(send_word)] = 1; // the first send's note
    EXPECT_TRUE(f.flows->poll());
    s = f.device(1);
    EXPECT_EQ(s.bytes_sent, mib);
    EXPECT_EQ(s.send_completions, 1u);
    EXPECT_EQ(s.outstanding_reqs, 2u);
    EXPECT_EQ(s.outstanding_bytes, 3 * mib);

    // One word covers every earlier number on it: the receive's and the second send's notes.
    f.words[size_t(send_word)] = 2;
    f.words[size_t(recv_word)] = 1;
    EXPECT_FALSE(f.flows->poll());
    s = f.device(1);
    EXPECT_EQ(s.bytes_sent, 3 * mib);
    EXPECT_EQ(s.bytes_recv, mib);
    EXPECT_EQ(s.outstanding_reqs, 0u);
    EXPECT_EQ(s.outstanding_bytes, 0u);
    EXPECT_GT(s.send_bw, 0.0);
    EXPECT_EQ(f.device(2).bytes_sent, 0u); // another peer untouched
}

TEST(DeviceFlows, TransfersOfEverySizeAreSampledTheRestCountedAtOnce) {
    Fixture f(2, 4);
    int word = -1;
    // Point-to-point transfers, even of 1 MiB (a note costs the stream a write to host memory): the first of every
    // 4 per path and direction is timed.
    EXPECT_NE(f.flows->posted(1, Dir::Send, 1 << 20, &word), 0u);
    for (int i = 0; i < 3; ++i) {
        EXPECT_EQ(f.flows->posted(1, Dir::Send, 1 << 20, &word), 0u);
        EXPECT_EQ(word, -1);
    }
    PathStats s = f.device(1);
    EXPECT_EQ(s.bytes_sent, 3u << 20); // the three not timed, counted as done
    EXPECT_EQ(s.outstanding_reqs, 1u);
    f.words[size_t(DeviceFlows::send_word(1))] = 1;
    EXPECT_FALSE(f.flows->poll());
    EXPECT_EQ(f.device(1).bytes_sent, 4u << 20);
    // Collectives go by their number: collective 8 timed (a multiple of 4), 9 not.
    f.flows->set_tag(TransferTag{1, 8});
    EXPECT_NE(f.flows->posted(1, Dir::Recv, 8, &word), 0u);
    f.flows->set_tag(TransferTag{1, 9});
    EXPECT_EQ(f.flows->posted(1, Dir::Recv, 8, &word), 0u);

    // Every transfer is timed with a sample of 1.
    Fixture all(2, 1);
    EXPECT_NE(all.flows->posted(1, Dir::Recv, 8, &word), 0u);
    EXPECT_NE(all.flows->posted(1, Dir::Recv, 8, &word), 0u);
}

TEST(DeviceFlows, HostLandingsAreCountedNeverTimed) {
    Fixture f(2, 1); // everything else would be timed
    f.flows->counted(1, Dir::Recv, 300);
    f.flows->counted(1, Dir::Recv, 300);
    PathStats s = f.device(1);
    EXPECT_EQ(s.bytes_recv, 600u);
    EXPECT_EQ(s.recv_completions, 2u);
    EXPECT_EQ(s.outstanding_reqs, 0u);
    EXPECT_FALSE(f.flows->outstanding());
}

TEST(DeviceFlows, KernelCallsAreSampledAtEverySizeAndCountEachPeer) {
    using Flow = DeviceFlows::KernelFlow;
    Fixture f(3, 64);
    const uint64_t big = 4 << 20;
    // A collective whose number is not a multiple of 64: counted at once, whatever its size.
    f.flows->set_tag(TransferTag{1, 5});
    EXPECT_EQ(f.flows->kernel_posted(0, big, Flow::EveryPeer, 0), 0u);
    EXPECT_EQ(f.device(1).bytes_sent, big);
    EXPECT_EQ(f.device(1).bytes_recv, big);
    EXPECT_EQ(f.device(2).bytes_sent, big);
    EXPECT_EQ(f.device(2).bytes_recv, big);
    EXPECT_EQ(f.device(0).bytes_sent, 0u); // no path to itself
    EXPECT_FALSE(f.flows->outstanding());
    // Broadcast from rank 2 (this rank is 0): one message, from the root.
    f.flows->set_tag(TransferTag{3, 6});
    EXPECT_EQ(f.flows->kernel_posted(0, 100, Flow::FromRoot, 2), 0u);
    EXPECT_EQ(f.device(2).bytes_recv, big + 100);
    EXPECT_EQ(f.device(1).bytes_recv, big);
    // Reduce to rank 1: this rank sends to it only.
    f.flows->set_tag(TransferTag{4, 7});
    EXPECT_EQ(f.flows->kernel_posted(0, 10, Flow::ToRoot, 1), 0u);
    EXPECT_EQ(f.device(1).bytes_sent, big + 10);
    EXPECT_EQ(f.device(2).bytes_sent, big);
    // This rank the root of a Reduce: it receives from every peer.
    f.flows->set_tag(TransferTag{4, 8});
    EXPECT_EQ(f.flows->kernel_posted(0, 1, Flow::ToRoot, 0), 0u);
    EXPECT_EQ(f.device(1).bytes_recv, big + 1);
    EXPECT_EQ(f.device(2).bytes_recv, big + 101);

    // Number 64: timed; one note for the whole call, on the kernel word.
    f.flows->set_tag(TransferTag{1, 64});
    const uint32_t note = f.flows->kernel_posted(0, 8, Flow::EveryPeer, 0);
    EXPECT_EQ(note, 1u);
    EXPECT_TRUE(f.flows->outstanding());
    EXPECT_EQ(f.device(1).outstanding_reqs, 2u);
    EXPECT_EQ(f.device(2).outstanding_reqs, 2u);
    f.words[size_t(f.flows->kernel_word())] = note;
    EXPECT_FALSE(f.flows->poll());
    EXPECT_EQ(f.device(1).outstanding_reqs, 0u);
    EXPECT_EQ(f.device(2).bytes_recv, big + 101 + 8);
}

TEST(DeviceFlows, GivenUpTransfersAreFailuresAndPausedOnesAreNotRecorded) {
    Fixture f(2);
    int word = -1;
    const uint32_t note = f.flows->posted(1, Dir::Recv, 1 << 20, &word);
    ASSERT_NE(note, 0u);
    f.flows->abandoned(word, note);
    PathStats s = f.device(1);
    EXPECT_EQ(s.failures, 1u);
    EXPECT_EQ(s.outstanding_reqs, 0u);
    EXPECT_EQ(s.bytes_recv, 0u);
    EXPECT_FALSE(f.flows->outstanding());

    f.flows->set_paused(true);
    EXPECT_EQ(f.flows->posted(1, Dir::Send, 1 << 20, &word), 0u);
    EXPECT_EQ(f.flows->kernel_posted(0, 1 << 20, DeviceFlows::KernelFlow::EveryPeer, 0), 0u);
    s = f.device(1);
    EXPECT_EQ(s.bytes_sent, 0u);
    EXPECT_EQ(s.outstanding_reqs, 0u);
    f.flows->set_paused(false);
    EXPECT_NE(f.flows->posted(1, Dir::Send, 1 << 20, &word), 0u);

    // Peers out of range are ignored.
    EXPECT_EQ(f.flows->posted(2, Dir::Send, 1 << 20, &word), 0u);
    EXPECT_EQ(f.flows->posted(-1, Dir::Send, 1 << 20, &word), 0u);
}

/* A peer that gave up its transfers with this rank releases this rank's waits without data: its timed transfers seen
 * done afterwards are failures, not bytes moved; another peer's are not touched. */
TEST(DeviceFlows, TransfersOfAPeerThatGaveUpAreFailuresWhenTheirNotesCome) {
    Fixture f(3, 1); // every transfer timed
    int from1 = -1, from2 = -1, kernel = -1;
    const uint32_t r1 = f.flows->posted(1, Dir::Recv, 1 << 20, &from1);
    const uint32_t r2 = f.flows->posted(2, Dir::Recv, 1 << 20, &from2);
    const uint32_t k = f.flows->kernel_posted(0, 4096, DeviceFlows::KernelFlow::EveryPeer, 0);
    kernel = f.flows->kernel_word();
    ASSERT_NE(r1, 0u);
    ASSERT_NE(r2, 0u);
    ASSERT_NE(k, 0u);
    f.flows->peer_failed(1);
    f.flows->peer_failed(7);  // out of range: ignored
    f.flows->peer_failed(-1);
    f.words[size_t(from1)] = r1;
    f.words[size_t(from2)] = r2;
    f.words[size_t(kernel)] = k;
    EXPECT_FALSE(f.flows->poll());
    PathStats s1 = f.device(1), s2 = f.device(2);
    EXPECT_EQ(s1.failures, 3u); // the receive and the kernel call's two directions with peer 1...
    EXPECT_EQ(s1.bytes_recv, 0u);
    EXPECT_EQ(s1.bytes_sent, 0u);
    EXPECT_EQ(s1.outstanding_reqs, 0u);
    EXPECT_EQ(s2.failures, 0u); // ...while peer 2's moved data
    EXPECT_EQ(s2.bytes_recv, (1u << 20) + 4096u);
    EXPECT_EQ(s2.bytes_sent, 4096u);
}

/* The gap this closes: a peer that gave up releases this rank's waits, the stream writes the note, and a poll sees
 * it before this rank has read the peer's FAIL word. The record must wait for that read, and then be a failure. */
TEST(DeviceFlows, ARecordSeenDoneWaitsForAFailReadThatStartedAfterIt) {
    Fixture f(3, 1); // every transfer timed
    f.clear_ns.assign(3, 0); // no read of the FAIL words yet
    int from1 = -1, from2 = -1;
    const uint32_t r1 = f.flows->posted(1, Dir::Recv, 1 << 20, &from1);
    const uint32_t r2 = f.flows->posted(2, Dir::Recv, 1 << 20, &from2);
    ASSERT_NE(r1, 0u);
    ASSERT_NE(r2, 0u);
    f.clean_read(1); // a read before the notes were seen vouches for nothing seen after it
    f.clean_read(2);
    f.words[size_t(from1)] = r1;
    f.words[size_t(from2)] = r2;
    EXPECT_FALSE(f.flows->poll()); // every note seen: nothing more to poll for
    EXPECT_TRUE(f.flows->outstanding());
    EXPECT_TRUE(f.flows->unconfirmed());
    PathStats s1 = f.device(1), s2 = f.device(2);
    EXPECT_EQ(s1.outstanding_reqs, 1u);
    EXPECT_EQ(s1.bytes_recv, 0u);
    EXPECT_EQ(s2.outstanding_reqs, 1u);
    EXPECT_FALSE(f.flows->poll()); // no read since: still waiting
    EXPECT_TRUE(f.flows->unconfirmed());

    // The next read finds peer 1's FAIL word written and peer 2's not.
    f.failed[1] = true;
    f.clean_read(2);
    EXPECT_FALSE(f.flows->poll());
    EXPECT_FALSE(f.flows->unconfirmed());
    s1 = f.device(1);
    s2 = f.device(2);
    EXPECT_EQ(s1.failures, 1u);
    EXPECT_EQ(s1.bytes_recv, 0u);
    EXPECT_EQ(s1.outstanding_reqs, 0u);
    EXPECT_EQ(s2.failures, 0u);
    EXPECT_EQ(s2.bytes_recv, 1u << 20);
    EXPECT_EQ(s2.outstanding_reqs, 0u);
}

/* Records a clean read vouched for stay data moved when the peer gives up later; only those seen after that read
 * become failures. A kernel call's records with the peer wait the same way. */
TEST(DeviceFlows, OnlyRecordsSeenAfterTheLastCleanReadBecomeFailures) {
    Fixture f(2, 1);
    f.clear_ns.assign(2, 0);
    int word = -1;
    const uint32_t first = f.flows->posted(1, Dir::Recv, 1000, &word);
    f.words[size_t(word)] = first;
    EXPECT_FALSE(f.flows->poll()); // every note seen: nothing more to poll for
    f.clean_read(1);
    EXPECT_FALSE(f.flows->poll());
    EXPECT_EQ(f.device(1).bytes_recv, 1000u);

    const uint32_t second = f.flows->posted(1, Dir::Recv, 3000, &word);
    const uint32_t k = f.flows->kernel_posted(0, 500, DeviceFlows::KernelFlow::EveryPeer, 0);
    f.words[size_t(word)] = second;
    f.words[size_t(f.flows->kernel_word())] = k;
    EXPECT_FALSE(f.flows->poll()); // every note seen: nothing more to poll for
    EXPECT_EQ(f.device(1).outstanding_reqs, 3u); // the receive and the kernel call's two directions
    f.failed[1] = true;
    EXPECT_FALSE(f.flows->poll());
    const PathStats s = f.device(1);
    EXPECT_EQ(s.bytes_recv, 1000u);
    EXPECT_EQ(s.bytes_sent, 0u);
    EXPECT_EQ(s.failures, 3u);
    EXPECT_EQ(s.outstanding_reqs, 0u);
}

/* A record confirmed late keeps the time its note was seen: the window's bandwidth is not stretched by the wait. */
TEST(DeviceFlows, AConfirmedRecordKeepsTheTimeItWasSeenDone) {
    Fixture f(2, 1);
    f.clear_ns.assign(2, 0);
    int word = -1;
    const uint32_t note = f.flows->posted(1, Dir::Send, 64 << 20, &word);
    f.words[size_t(word)] = note;
    EXPECT_FALSE(f.flows->poll()); // every note seen: nothing more to poll for
    EXPECT_TRUE(f.flows->unconfirmed());
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    f.clean_read(1);
    EXPECT_FALSE(f.flows->poll());
    const PathStats s = f.device(1);
    EXPECT_EQ(s.bytes_sent, uint64_t(64) << 20);
    // Stamped when it was seen, not 200 ms later when it was confirmed (at most 64 MiB / 0.2 s = 0.34 GB/s): a
    // bound with room for a preempted test (the post and the poll 100 ms apart would still pass).
    EXPECT_GT(s.send_bw, double(64 << 20) / 0.1) << "the completion was stamped when it was confirmed";
}

} // namespace
