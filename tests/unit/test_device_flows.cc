/*
 * Telemetry of the device path (comm/device_flows.h) against fake note words: which transfers are timed, that a
 * timed one stays outstanding until the stream's note for it (or a later one) is read, that kernel calls are
 * sampled at every size and count each peer's bytes, that a transfer given up (or one with a peer that gave up)
 * counts as a failure, and that nothing is recorded while paused. Part of tests/unit/test_telemetry (the stream side
 * runs on a GPU: GpuTelemetry in tests/gpu).
 */
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "comm/device_flows.h"
#include "telemetry/telemetry.h"

using namespace vccl;
using namespace vccl::telemetry;

namespace {

struct Fixture {
    std::unique_ptr<Telemetry> telemetry;
    std::vector<uint32_t> words;
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
        flows = std::make_unique<DeviceFlows>(telemetry.get(), nranks, [this](int w) { return words[size_t(w)]; });
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

} // namespace
