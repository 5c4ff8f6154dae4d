/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Point-to-point: vcclSend/vcclRecv inside vcclGroupStart/End with host buffers and NULL streams.
 * Ring exchange, all-to-all through p2p with peers posted in a random (rank-seeded) order, send/recv to
 * self, several messages to one peer matching in order, sizes 0 .. 8 MiB, nested groups, and blocking
 * pairwise send/recv outside groups. Payloads are a function of (source, destination, message, index), so
 * a message delivered to the wrong buffer or in the wrong order shows.
 */
#include <algorithm>
#include <numeric>
#include <random>
#include <sstream>

#include "mpi_gtest_main.h"
#include "test_util.h"

using namespace vtest;

namespace {

uint8_t payload_byte(int src, int dst, int msg, size_t i) {
    uint64_t x = uint64_t(src) * 0x9E3779B1u + uint64_t(dst) * 0x85EBCA77u + uint64_t(msg) * 0xC2B2AE3Du +
                 uint64_t(i) * 0x27D4EB2Fu;
    x ^= x >> 15;
    x *= 0x2C1B3C6Du;
    x ^= x >> 12;
    return uint8_t(x);
}

void fill_payload(GuardedBuffer& b, int src, int dst, int msg) {
    for (size_t i = 0; i < b.bytes(); ++i) b.data()[i] = payload_byte(src, dst, msg, i);
}

/* Appends to *why and returns false when b does not hold the payload of (src, dst, msg). */
bool check_payload(const GuardedBuffer& b, int src, int dst, int msg, const std::string& where, std::string* why) {
    bool ok = true;
    for (size_t i = 0; i < b.bytes(); ++i)
        if (b.data()[i] != payload_byte(src, dst, msg, i)) {
            std::ostringstream os;
            os << where << ": byte " << i << " of " << b.bytes() << " is wrong (message " << msg << " from "
               << src << ")\n";
            *why += os.str();
            ok = false;
            break;
        }
    if (!b.guards_intact()) {
        *why += where + ": guard zone overwritten\n";
        ok = false;
    }
    return ok;
}

bool check_rc(vcclResult_t rc, const std::string& what, std::string* why) {
    if (rc == vcclSuccess) return true;
    *why += what + " returned " + result_str(rc) + ": " + vcclGetLastError(nullptr) + "\n";
    return false;
}

/* Sizes in bytes, 0 .. 8 MiB; sent as the given datatype (bytes are multiples of its size). */
const std::vector<size_t> kSizes = {0, 1, 2, 3, 7, 8, 1023, 4096, 65537, 1 << 20, (1 << 20) + 5, 8 << 20};

class P2p : public ::testing::TestWithParam<CommKind> {
protected:
    void SetUp() override { comm_ = shared_comm(GetParam()); }
    vcclComm_t comm_ = nullptr;
    int rank_ = world_rank(), n_ = world_size();
};

std::string kind_name(const ::testing::TestParamInfo<CommKind>& info) { return comm_kind_name(info.param); }

TEST_P(P2p, RingExchangeAllSizes) {
    ASSERT_ALL_RANKS(comm_ != nullptr);
    const int next = (rank_ + 1) % n_, prev = (rank_ + n_ - 1) % n_;
    for (vcclDataType_t t : {vcclInt8, vcclFloat16, vcclInt32, vcclFloat64})
        for (size_t bytes : kSizes) {
            const size_t es = type_size(t), count = bytes / es;
            if (count * es != bytes) continue;
            GuardedBuffer send(bytes), recv(bytes);
            fill_payload(send, rank_, next, int(t));
            std::string why, where = std::string(type_name(t)) + " bytes=" + std::to_string(bytes);
            bool rc_ok = check_rc(vcclGroupStart(), "GroupStart", &why);
            rc_ok &= check_rc(vcclSend(send.data(), count, t, next, comm_, nullptr), where + " Send", &why);
            rc_ok &= check_rc(vcclRecv(recv.data(), count, t, prev, comm_, nullptr), where + " Recv", &why);
            rc_ok &= check_rc(vcclGroupEnd(), where + " GroupEnd", &why);
            ASSERT_ALL_RANKS_WHY(rc_ok, why);
            bool ok = check_payload(recv, prev, rank_, int(t), where + " recv", &why);
            ok &= check_payload(send, rank_, next, int(t), where + " send (changed)", &why);
            EXPECT_ALL_RANKS_WHY(ok, why);
        }
}

TEST_P(P2p, InPlaceRingExchange) {
    // One buffer is both the send and the receive buffer of a group: the outgoing data must be the buffer's
    // contents before the group, whatever size (eager or rendezvous) the message is.
    ASSERT_ALL_RANKS(comm_ != nullptr);
    const int next = (rank_ + 1) % n_, prev = (rank_ + n_ - 1) % n_;
    for (size_t bytes : kSizes) {
        GuardedBuffer buf(bytes);
        fill_payload(buf, rank_, next, 7);
        std::string why, where = "in-place bytes=" + std::to_string(bytes);
        bool rc_ok = check_rc(vcclGroupStart(), "GroupStart", &why);
        rc_ok &= check_rc(vcclRecv(buf.data(), bytes, vcclUint8, prev, comm_, nullptr), where + " Recv", &why);
        rc_ok &= check_rc(vcclSend(buf.data(), bytes, vcclUint8, next, comm_, nullptr), where + " Send", &why);
        rc_ok &= check_rc(vcclGroupEnd(), where + " GroupEnd", &why);
        ASSERT_ALL_RANKS_WHY(rc_ok, why);
        EXPECT_ALL_RANKS_WHY(check_payload(buf, prev, rank_, 7, where, &why), why);
    }
}

TEST_P(P2p, AllToAllRandomPostingOrder) {
    ASSERT_ALL_RANKS(comm_ != nullptr);
    for (size_t bytes : {size_t(0), size_t(1), size_t(4099), size_t(262147)}) {
        std::vector<GuardedBuffer> send, recv;
        for (int p = 0; p < n_; ++p) {
            send.emplace_back(bytes);
            recv.emplace_back(bytes);
            fill_payload(send.back(), rank_, p, 7);
        }
        /* 2n operations (a send to and a receive from every peer, self included) in a random order. */
        std::vector<int> ops(size_t(2 * n_));
        std::iota(ops.begin(), ops.end(), 0);
        std::mt19937 rng(unsigned(rank_) * 7919u + unsigned(bytes));
        std::shuffle(ops.begin(), ops.end(), rng);
        std::string why, where = "bytes=" + std::to_string(bytes);
        bool rc_ok = check_rc(vcclGroupStart(), "GroupStart", &why);
        for (int op : ops) {
            int peer = op / 2;
            if (op % 2 == 0)
                rc_ok &= check_rc(vcclSend(send[size_t(peer)].data(), bytes, vcclUint8, peer, comm_, nullptr),
                                  where + " Send to " + std::to_string(peer), &why);
            else
                rc_ok &= check_rc(vcclRecv(recv[size_t(peer)].data(), bytes, vcclUint8, peer, comm_, nullptr),
                                  where + " Recv from " + std::to_string(peer), &why);
        }
        rc_ok &= check_rc(vcclGroupEnd(), where + " GroupEnd", &why);
        ASSERT_ALL_RANKS_WHY(rc_ok, why);
        bool ok = true;
        for (int p = 0; p < n_; ++p)
            ok &= check_payload(recv[size_t(p)], p, rank_, 7, where + " from " + std::to_string(p), &why);
        EXPECT_ALL_RANKS_WHY(ok, why);
    }
}

TEST_P(P2p, SendRecvToSelf) {
    ASSERT_ALL_RANKS(comm_ != nullptr);
    for (size_t bytes : {size_t(0), size_t(1), size_t(1000), size_t(3 << 20)}) {
        GuardedBuffer send(bytes), recv(bytes);
        fill_payload(send, rank_, rank_, 3);
        std::string why, where = "self bytes=" + std::to_string(bytes);
        /* Receive posted before the send: order within a group must not matter. */
        bool rc_ok = check_rc(vcclGroupStart(), "GroupStart", &why);
        rc_ok &= check_rc(vcclRecv(recv.data(), bytes, vcclUint8, rank_, comm_, nullptr), where + " Recv", &why);
        rc_ok &= check_rc(vcclSend(send.data(), bytes, vcclUint8, rank_, comm_, nullptr), where + " Send", &why);
        rc_ok &= check_rc(vcclGroupEnd(), where + " GroupEnd", &why);
        ASSERT_ALL_RANKS_WHY(rc_ok, why);
        EXPECT_ALL_RANKS_WHY(check_payload(recv, rank_, rank_, 3, where, &why), why);
    }
}

TEST_P(P2p, SeveralMessagesToOnePeerMatchInOrder) {
    ASSERT_ALL_RANKS(comm_ != nullptr);
    const int next = (rank_ + 1) % n_, prev = (rank_ + n_ - 1) % n_;
    /* Different sizes, so that a receive matched out of order also gets the wrong length. */
    const std::vector<size_t> sizes = {5, 0, 70000, 1, 4096, 4096, 2 << 20, 33};
    std::vector<GuardedBuffer> send, recv;
    for (size_t m = 0; m < sizes.size(); ++m) {
        send.emplace_back(sizes[m]);
        recv.emplace_back(sizes[m]);
        fill_payload(send.back(), rank_, next, int(m));
    }
    std::string why;
    bool rc_ok = check_rc(vcclGroupStart(), "GroupStart", &why);
    /* Receives first on odd ranks, sends first on even ones. */
    for (int pass = 0; pass < 2; ++pass) {
        bool sends = (pass == 0) == (rank_ % 2 == 0);
        for (size_t m = 0; m < sizes.size(); ++m) {
            if (sends)
                rc_ok &= check_rc(vcclSend(send[m].data(), sizes[m], vcclUint8, next, comm_, nullptr),
                                  "Send #" + std::to_string(m), &why);
            else
                rc_ok &= check_rc(vcclRecv(recv[m].data(), sizes[m], vcclUint8, prev, comm_, nullptr),
                                  "Recv #" + std::to_string(m), &why);
        }
    }
    rc_ok &= check_rc(vcclGroupEnd(), "GroupEnd", &why);
    ASSERT_ALL_RANKS_WHY(rc_ok, why);
    bool ok = true;
    for (size_t m = 0; m < sizes.size(); ++m)
        ok &= check_payload(recv[m], prev, rank_, int(m), "message #" + std::to_string(m), &why);
    EXPECT_ALL_RANKS_WHY(ok, why);
}

TEST_P(P2p, SameSizeMessagesMatchInOrderAcrossGroups) {
    /* Same sizes: only the order tells them apart. Two groups back to back, 4 messages each. */
    ASSERT_ALL_RANKS(comm_ != nullptr);
    const int next = (rank_ + 1) % n_, prev = (rank_ + n_ - 1) % n_;
    std::string why;
    bool rc_ok = true, ok = true;
    for (int g = 0; g < 2; ++g) {
        std::vector<GuardedBuffer> send, recv;
        for (int m = 0; m < 4; ++m) {
            send.emplace_back(1000);
            recv.emplace_back(1000);
            fill_payload(send.back(), rank_, next, g * 10 + m);
        }
        rc_ok &= check_rc(vcclGroupStart(), "GroupStart", &why);
        for (int m = 0; m < 4; ++m) {
            rc_ok &= check_rc(vcclSend(send[size_t(m)].data(), 250, vcclFloat32, next, comm_, nullptr), "Send", &why);
            rc_ok &= check_rc(vcclRecv(recv[size_t(m)].data(), 250, vcclFloat32, prev, comm_, nullptr), "Recv", &why);
        }
        rc_ok &= check_rc(vcclGroupEnd(), "GroupEnd", &why);
        if (rc_ok)
            for (int m = 0; m < 4; ++m)
                ok &= check_payload(recv[size_t(m)], prev, rank_, g * 10 + m,
                                    "group " + std::to_string(g) + " message " + std::to_string(m), &why);
    }
    ASSERT_ALL_RANKS_WHY(rc_ok, why);
    EXPECT_ALL_RANKS_WHY(ok, why);
}

TEST_P(P2p, NestedGroupsIssueAtOutermostEnd) {
    ASSERT_ALL_RANKS(comm_ != nullptr);
    const int next = (rank_ + 1) % n_, prev = (rank_ + n_ - 1) % n_;
    const size_t bytes = 100003;
    GuardedBuffer send(bytes), recv(bytes);
    fill_payload(send, rank_, next, 11);
    std::string why;
    bool rc_ok = check_rc(vcclGroupStart(), "GroupStart (outer)", &why);
    rc_ok &= check_rc(vcclGroupStart(), "GroupStart (inner)", &why);
    rc_ok &= check_rc(vcclRecv(recv.data(), bytes, vcclUint8, prev, comm_, nullptr), "Recv", &why);
    rc_ok &= check_rc(vcclGroupEnd(), "GroupEnd (inner)", &why);
    /* The inner end must not issue anything: the receive has not run yet. */
    bool untouched = std::all_of(recv.data(), recv.data() + bytes, [](uint8_t b) { return b == kUnwrittenByte; });
    if (!untouched) why += "the receive ran at the inner vcclGroupEnd\n";
    rc_ok &= check_rc(vcclGroupStart(), "GroupStart (inner 2)", &why);
    rc_ok &= check_rc(vcclSend(send.data(), bytes, vcclUint8, next, comm_, nullptr), "Send", &why);
    rc_ok &= check_rc(vcclGroupEnd(), "GroupEnd (inner 2)", &why);
    rc_ok &= check_rc(vcclGroupEnd(), "GroupEnd (outer)", &why);
    ASSERT_ALL_RANKS_WHY(rc_ok, why);
    bool ok = untouched && check_payload(recv, prev, rank_, 11, "nested", &why);
    EXPECT_ALL_RANKS_WHY(ok, why);
}

TEST_P(P2p, UngroupedPairwiseBlocking) {
    /* Outside a group each call completes before it returns: pair ranks (0,1), (2,3), ...; the even rank
     * sends then receives, the odd one receives then sends. A rank without a partner sits out. */
    ASSERT_ALL_RANKS(comm_ != nullptr);
    const int partner = (rank_ % 2 == 0) ? rank_ + 1 : rank_ - 1;
    const bool active = partner < n_;
    std::string why;
    bool rc_ok = true, ok = true;
    for (size_t bytes : {size_t(0), size_t(17), size_t(1 << 20)}) {
        if (!active) continue;
        GuardedBuffer send(bytes), recv(bytes);
        fill_payload(send, rank_, partner, 5);
        std::string where = "bytes=" + std::to_string(bytes);
        if (rank_ % 2 == 0) {
            rc_ok &= check_rc(vcclSend(send.data(), bytes, vcclInt8, partner, comm_, nullptr), where + " Send", &why);
            rc_ok &= check_rc(vcclRecv(recv.data(), bytes, vcclInt8, partner, comm_, nullptr), where + " Recv", &why);
        } else {
            rc_ok &= check_rc(vcclRecv(recv.data(), bytes, vcclInt8, partner, comm_, nullptr), where + " Recv", &why);
            rc_ok &= check_rc(vcclSend(send.data(), bytes, vcclInt8, partner, comm_, nullptr), where + " Send", &why);
        }
        if (!rc_ok) break;
        ok &= check_payload(recv, partner, rank_, 5, where, &why);
    }
    ASSERT_ALL_RANKS_WHY(rc_ok, why);
    EXPECT_ALL_RANKS_WHY(ok, why);
}

TEST_P(P2p, ManyPeersManySmallMessagesInOneGroup) {
    /* Every rank sends 3 messages to every rank (self included) in one group; receives posted in the
     * reverse peer order. */
    ASSERT_ALL_RANKS(comm_ != nullptr);
    std::vector<GuardedBuffer> send, recv;
    for (int p = 0; p < n_; ++p)
        for (int m = 0; m < 3; ++m) {
            send.emplace_back(size_t(13 * (m + 1)));
            recv.emplace_back(size_t(13 * (m + 1)));
            fill_payload(send.back(), rank_, p, 100 + m);
        }
    std::string why;
    bool rc_ok = check_rc(vcclGroupStart(), "GroupStart", &why);
    for (int p = 0; p < n_; ++p)
        for (int m = 0; m < 3; ++m) {
            GuardedBuffer& b = send[size_t(p * 3 + m)];
            rc_ok &= check_rc(vcclSend(b.data(), b.bytes(), vcclUint8, p, comm_, nullptr), "Send", &why);
        }
    for (int p = n_ - 1; p >= 0; --p)
        for (int m = 0; m < 3; ++m) {
            GuardedBuffer& b = recv[size_t(p * 3 + m)];
            rc_ok &= check_rc(vcclRecv(b.data(), b.bytes(), vcclUint8, p, comm_, nullptr), "Recv", &why);
        }
    rc_ok &= check_rc(vcclGroupEnd(), "GroupEnd", &why);
    ASSERT_ALL_RANKS_WHY(rc_ok, why);
    bool ok = true;
    for (int p = 0; p < n_; ++p)
        for (int m = 0; m < 3; ++m)
            ok &= check_payload(recv[size_t(p * 3 + m)], p, rank_, 100 + m,
                                "from " + std::to_string(p) + " #" + std::to_string(m), &why);
    EXPECT_ALL_RANKS_WHY(ok, why);
}

INSTANTIATE_TEST_SUITE_P(, P2p, ::testing::Values(CommKind::Mpi, CommKind::UniqueId), kind_name);

} // namespace
