/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Communicator lifecycle: vcclCommSplit (colors, keys, VCCL_SPLIT_NOCOLOR, child outliving its parent), vcclCommShrink,
 * vcclCommCount/UserRank, use after destroy, vcclCommAbort latency, vcclCommGetAsyncError, nonblocking creation
 * (vcclConfig_t.blocking = 0), versions and error strings, and many communicators created and destroyed in a row.
 */
#include <algorithm>
#include <atomic>
#include <chrono>
#include <set>
#include <sstream>
#include <thread>

#include "mpi_gtest_main.h"
#include "test_util.h"

using namespace vtest;

namespace {

std::string rc_why(const char* what, vcclResult_t got, vcclResult_t want) {
    if (got == want) return std::string();
    return std::string(what) + " returned " + result_str(got) + ", want " + result_str(want) + " (" +
           vcclGetLastError(nullptr) + ")";
}

/* Sum over the ranks of comm of `value` (an int64 allreduce), or -1 on error. */
int64_t comm_sum(vcclComm_t comm, int64_t value, vcclResult_t* rc) {
    int64_t out = -12345;
    *rc = vcclAllReduce(&value, &out, 1, vcclInt64, vcclSum, comm, nullptr);
    return out;
}

class CommTest : public ::testing::Test {
protected:
    int rank_ = world_rank(), n_ = world_size();
};

TEST_F(CommTest, CountAndUserRankMatchMpi) {
    for (CommKind kind : {CommKind::Mpi, CommKind::UniqueId}) {
        vcclResult_t rc;
        vcclComm_t c = make_comm(kind, &rc);
        ASSERT_ALL_RANKS_WHY(c != nullptr, rc_why("create", rc, vcclSuccess)) << comm_kind_name(kind);
        int count = -1, r = -1;
        vcclResult_t rc1 = vcclCommCount(c, &count), rc2 = vcclCommUserRank(c, &r);
        EXPECT_ALL_RANKS(rc1 == vcclSuccess && rc2 == vcclSuccess && count == n_ && r == rank_)
            << comm_kind_name(kind) << " count " << count << " rank " << r;
        EXPECT_ALL_RANKS(vcclCommDestroy(c) == vcclSuccess);
    }
}

TEST_F(CommTest, SplitEvenOdd) {
    vcclComm_t parent = shared_comm(CommKind::Mpi);
    ASSERT_ALL_RANKS(parent != nullptr);
    vcclComm_t child = nullptr;
    vcclResult_t rc = vcclCommSplit(parent, rank_ % 2, rank_, &child, nullptr);
    ASSERT_ALL_RANKS_WHY(rc == vcclSuccess && child != nullptr, rc_why("vcclCommSplit", rc, vcclSuccess));
    int count = -1, r = -1;
    vcclCommCount(child, &count);
    vcclCommUserRank(child, &r);
    int want_count = (rank_ % 2 == 0) ? (n_ + 1) / 2 : n_ / 2;
    EXPECT_ALL_RANKS(count == want_count && r == rank_ / 2) << "count " << count << " rank " << r;

    /* Collectives on the child interleaved with collectives on the parent (both alive). */
    int64_t want_child = 0;
    for (int i = rank_ % 2; i < n_; i += 2) want_child += i + 1;
    int64_t want_parent = int64_t(n_) * (n_ + 1) / 2;
    for (int it = 0; it < 3; ++it) {
        vcclResult_t rc1, rc2;
        int64_t s_child = comm_sum(child, rank_ + 1, &rc1);
        int64_t s_parent = comm_sum(parent, rank_ + 1, &rc2);
        EXPECT_ALL_RANKS(rc1 == vcclSuccess && rc2 == vcclSuccess && s_child == want_child && s_parent == want_parent)
            << "iteration " << it << ": child sum " << s_child << " (want " << want_child << "), parent sum "
            << s_parent << " (want " << want_parent << ")";
    }
    /* AllGather on the child: parent ranks in child-rank order. */
    std::vector<int32_t> got(size_t(want_count), -1);
    int32_t me = rank_;
    rc = vcclAllGather(&me, got.data(), 1, vcclInt32, child, nullptr);
    bool ok = rc == vcclSuccess;
    for (int i = 0; i < want_count; ++i) ok &= got[size_t(i)] == 2 * i + rank_ % 2;
    EXPECT_ALL_RANKS(ok);
    EXPECT_ALL_RANKS(vcclCommDestroy(child) == vcclSuccess);
}

TEST_F(CommTest, SplitKeyReversesOrder) {
    vcclComm_t parent = shared_comm(CommKind::UniqueId);
    ASSERT_ALL_RANKS(parent != nullptr);
    vcclComm_t child = nullptr;
    vcclResult_t rc = vcclCommSplit(parent, 7, n_ - rank_, &child, nullptr);
    ASSERT_ALL_RANKS_WHY(rc == vcclSuccess && child != nullptr, rc_why("vcclCommSplit", rc, vcclSuccess));
    int r = -1;
    vcclCommUserRank(child, &r);
    EXPECT_ALL_RANKS(r == n_ - 1 - rank_) << "child rank " << r;
    std::vector<int32_t> got(size_t(n_), -1);
    int32_t me = rank_;
    rc = vcclAllGather(&me, got.data(), 1, vcclInt32, child, nullptr);
    bool ok = rc == vcclSuccess;
    for (int i = 0; i < n_; ++i) ok &= got[size_t(i)] == n_ - 1 - i;
    EXPECT_ALL_RANKS(ok) << "allgather of parent ranks on the reversed child";
    EXPECT_ALL_RANKS(vcclCommDestroy(child) == vcclSuccess);
}

TEST_F(CommTest, SplitEqualKeysKeepParentOrder) {
    vcclComm_t parent = shared_comm(CommKind::Mpi);
    ASSERT_ALL_RANKS(parent != nullptr);
    vcclComm_t child = nullptr;
    vcclResult_t rc = vcclCommSplit(parent, 0, 0, &child, nullptr);
    ASSERT_ALL_RANKS_WHY(rc == vcclSuccess && child != nullptr, rc_why("vcclCommSplit", rc, vcclSuccess));
    int r = -1;
    vcclCommUserRank(child, &r);
    EXPECT_ALL_RANKS(r == rank_);
    EXPECT_ALL_RANKS(vcclCommDestroy(child) == vcclSuccess);
}

TEST_F(CommTest, SplitNoColorGivesNull) {
    vcclComm_t parent = shared_comm(CommKind::Mpi);
    ASSERT_ALL_RANKS(parent != nullptr);
    const bool out = rank_ % 3 == 2;
    vcclComm_t child = reinterpret_cast<vcclComm_t>(uintptr_t(0x1)); // must be overwritten with NULL
    vcclResult_t rc = vcclCommSplit(parent, out ? VCCL_SPLIT_NOCOLOR : 0, rank_, &child, nullptr);
    ASSERT_ALL_RANKS_WHY(rc == vcclSuccess, rc_why("vcclCommSplit", rc, vcclSuccess));
    EXPECT_ALL_RANKS(out ? child == nullptr : (child != nullptr && child != reinterpret_cast<vcclComm_t>(uintptr_t(1))))
        << "NOCOLOR ranks get NULL, the others a communicator";
    int want_count = 0;
    for (int i = 0; i < n_; ++i) want_count += i % 3 != 2;
    int count = -1;
    int64_t sum = -1;
    vcclResult_t rc1 = vcclSuccess, rc2 = vcclSuccess;
    if (!out) {
        rc1 = vcclCommCount(child, &count);
        sum = comm_sum(child, 1, &rc2);
    }
    EXPECT_ALL_RANKS(out || (rc1 == vcclSuccess && rc2 == vcclSuccess && count == want_count && sum == want_count))
        << "count " << count << " sum " << sum << " want " << want_count;
    if (!out) {
        EXPECT_EQ(vcclCommDestroy(child), vcclSuccess);
    }
    /* The parent is still fine. */
    vcclResult_t rc3;
    EXPECT_ALL_RANKS(comm_sum(parent, 1, &rc3) == n_ && rc3 == vcclSuccess);
}

/* The highest rank is left out and takes no part (as a dead rank would not); the others shrink, in planned
 * and in abort mode, and the new communicator computes over the remaining ranks only. */
TEST_F(CommTest, ShrinkExcludesTheLastRank) {
    if (n_ < 2) GTEST_SKIP() << "needs 2 ranks";
    for (int flags : {VCCL_SHRINK_DEFAULT, VCCL_SHRINK_ABORT}) {
        vcclResult_t rc = vcclSuccess;
        vcclComm_t parent = make_comm(CommKind::Mpi, &rc);
        ASSERT_ALL_RANKS(parent != nullptr);
        int excluded = n_ - 1;
        vcclComm_t child = nullptr;
        std::string why;
        if (rank_ != excluded) {
            rc = vcclCommShrink(parent, &excluded, 1, &child, nullptr, flags);
            why = rc_why("vcclCommShrink", rc, vcclSuccess);
            if (rc == vcclSuccess && child != nullptr) {
                int count = -1, r = -1;
                vcclCommCount(child, &count);
                vcclCommUserRank(child, &r);
                if (count != n_ - 1 || r != rank_) why = "shrunk comm has count " + std::to_string(count) + " rank " + std::to_string(r);
                vcclResult_t rc2;
                int64_t sum = comm_sum(child, rank_ + 1, &rc2);
                int64_t want = int64_t(n_ - 1) * n_ / 2; // 1 + ... + (n-1)
                if (rc2 != vcclSuccess || sum != want)
                    why = "allreduce on the shrunk comm gave " + std::to_string(sum) + ", want " + std::to_string(want);
            }
        }
        EXPECT_ALL_RANKS_WHY(why.empty(), why + " (flags " + std::to_string(flags) + ")");
        if (child != nullptr) EXPECT_EQ(vcclCommDestroy(child), vcclSuccess);
        MPI_Barrier(MPI_COMM_WORLD);
        EXPECT_EQ(flags == VCCL_SHRINK_ABORT && rank_ != excluded ? vcclCommAbort(parent) : vcclCommDestroy(parent),
                  vcclSuccess);
    }
}

TEST_F(CommTest, ShrinkRejectsBadArguments) {
    vcclComm_t comm = shared_comm(CommKind::Mpi);
    ASSERT_ALL_RANKS(comm != nullptr);
    vcclComm_t out = nullptr;
    int self = rank_, bad = n_, twice[2] = {0, 0}, neg = -1;
    EXPECT_EQ(vcclCommShrink(comm, &self, 1, &out, nullptr, VCCL_SHRINK_DEFAULT), vcclInvalidUsage);
    EXPECT_EQ(vcclCommShrink(comm, &bad, 1, &out, nullptr, VCCL_SHRINK_DEFAULT), vcclInvalidArgument);
    EXPECT_EQ(vcclCommShrink(comm, &neg, 1, &out, nullptr, VCCL_SHRINK_DEFAULT), vcclInvalidArgument);
    EXPECT_EQ(vcclCommShrink(comm, twice, 2, &out, nullptr, VCCL_SHRINK_DEFAULT), vcclInvalidArgument);
    EXPECT_EQ(vcclCommShrink(comm, nullptr, 1, &out, nullptr, VCCL_SHRINK_DEFAULT), vcclInvalidArgument);
    EXPECT_EQ(vcclCommShrink(comm, &bad, -1, &out, nullptr, VCCL_SHRINK_DEFAULT), vcclInvalidArgument);
    EXPECT_EQ(vcclCommShrink(comm, &bad, 1, nullptr, nullptr, VCCL_SHRINK_DEFAULT), vcclInvalidArgument);
    EXPECT_EQ(vcclCommShrink(comm, &bad, 1, &out, nullptr, 0x10), vcclInvalidArgument);
    EXPECT_EQ(vcclCommShrink(nullptr, &bad, 1, &out, nullptr, VCCL_SHRINK_DEFAULT), vcclInvalidArgument);
    EXPECT_EQ(out, nullptr);
}

TEST_F(CommTest, DestroyParentBeforeChild) {
    vcclResult_t rc;
    vcclComm_t parent = make_comm(CommKind::Mpi, &rc);
    ASSERT_ALL_RANKS_WHY(parent != nullptr, rc_why("vcclCommInitMPI", rc, vcclSuccess));
    vcclComm_t child = nullptr, grandchild = nullptr;
    rc = vcclCommSplit(parent, rank_ % 2, -rank_, &child, nullptr);
    ASSERT_ALL_RANKS_WHY(rc == vcclSuccess && child != nullptr, rc_why("vcclCommSplit", rc, vcclSuccess));
    rc = vcclCommSplit(child, 0, 0, &grandchild, nullptr);
    ASSERT_ALL_RANKS_WHY(rc == vcclSuccess && grandchild != nullptr, rc_why("vcclCommSplit (grandchild)", rc, vcclSuccess));
    EXPECT_ALL_RANKS(vcclCommDestroy(parent) == vcclSuccess);
    int64_t want = 0;
    for (int i = rank_ % 2; i < n_; i += 2) want += i;
    vcclResult_t rc1, rc2;
    int64_t s1 = comm_sum(child, rank_, &rc1);
    int64_t s2 = comm_sum(grandchild, rank_, &rc2);
    EXPECT_ALL_RANKS(rc1 == vcclSuccess && s1 == want && rc2 == vcclSuccess && s2 == want)
        << "child " << s1 << " grandchild " << s2 << " want " << want;
    EXPECT_ALL_RANKS(vcclCommDestroy(child) == vcclSuccess);
    vcclResult_t rc3;
    int64_t s3 = comm_sum(grandchild, 1, &rc3);
    EXPECT_ALL_RANKS(rc3 == vcclSuccess && s3 == (n_ + 1 - rank_ % 2) / 2);
    EXPECT_ALL_RANKS(vcclCommDestroy(grandchild) == vcclSuccess);
}

TEST_F(CommTest, UseAfterDestroyIsInvalidUsage) {
    vcclResult_t rc;
    vcclComm_t c = make_comm(CommKind::Mpi, &rc);
    ASSERT_ALL_RANKS_WHY(c != nullptr, rc_why("vcclCommInitMPI", rc, vcclSuccess));
    ASSERT_ALL_RANKS(vcclCommDestroy(c) == vcclSuccess);
    int x = 0, y = 0;
    vcclResult_t ae = vcclSuccess;
    vcclComm_t nc = nullptr;
    std::string why;
    auto expect = [&](const char* what, vcclResult_t got) { why += rc_why(what, got, vcclInvalidUsage); };
    expect("vcclCommCount", vcclCommCount(c, &x));
    expect("vcclCommUserRank", vcclCommUserRank(c, &x));
    expect("vcclCommGetAsyncError", vcclCommGetAsyncError(c, &ae));
    expect("vcclAllReduce", vcclAllReduce(&x, &y, 1, vcclInt32, vcclSum, c, nullptr));
    expect("vcclBroadcast", vcclBroadcast(&x, &y, 1, vcclInt32, 0, c, nullptr));
    expect("vcclReduce", vcclReduce(&x, &y, 1, vcclInt32, vcclSum, 0, c, nullptr));
    expect("vcclAllGather", vcclAllGather(&x, &y, 1, vcclInt32, c, nullptr));
    expect("vcclReduceScatter", vcclReduceScatter(&x, &y, 1, vcclInt32, vcclSum, c, nullptr));
    expect("vcclAlltoAll", vcclAlltoAll(&x, &y, 1, vcclInt32, c, nullptr));
    expect("vcclSend", vcclSend(&x, 1, vcclInt32, 0, c, nullptr));
    expect("vcclRecv", vcclRecv(&x, 1, vcclInt32, 0, c, nullptr));
    expect("vcclCommSplit", vcclCommSplit(c, 0, 0, &nc, nullptr));
    expect("vcclCommDestroy (again)", vcclCommDestroy(c));
    expect("vcclCommAbort", vcclCommAbort(c));
    EXPECT_ALL_RANKS_WHY(why.empty(), why);
    EXPECT_ALL_RANKS(nc == nullptr) << "output written on failure";
}

/* A destroyed handle stays dead when new communicators are made: malloc may give the next communicator the freed
 * address, and the stale handle must not then pass the live-handle check and act on the new one (its
 * vcclCommDestroy would destroy it). Ten rounds, each comparing the stale handle with every new one. */
TEST_F(CommTest, StaleHandleNeverReachesANewCommunicator) {
    std::string why;
    for (int round = 0; round < 10 && why.empty(); ++round) {
        vcclResult_t rc;
        vcclComm_t old = make_comm(CommKind::Mpi, &rc);
        ASSERT_ALL_RANKS_WHY(old != nullptr, rc_why("vcclCommInitMPI", rc, vcclSuccess));
        ASSERT_ALL_RANKS(vcclCommDestroy(old) == vcclSuccess);
        vcclComm_t fresh = make_comm(CommKind::Mpi, &rc);
        ASSERT_ALL_RANKS_WHY(fresh != nullptr, rc_why("vcclCommInitMPI", rc, vcclSuccess));
        if (fresh == old) why += "round " + std::to_string(round) + ": the new communicator has the old handle; ";
        int n = 0;
        why += rc_why("vcclCommCount (stale)", vcclCommCount(old, &n), vcclInvalidUsage);
        why += rc_why("vcclCommDestroy (stale)", vcclCommDestroy(old), vcclInvalidUsage);
        vcclResult_t rs;
        int64_t sum = comm_sum(fresh, 1, &rs);
        if (rs != vcclSuccess || sum != n_) why += "the new communicator no longer works; ";
        why += rc_why("vcclCommDestroy (new)", vcclCommDestroy(fresh), vcclSuccess);
    }
    EXPECT_ALL_RANKS_WHY(why.empty(), why);
}

TEST_F(CommTest, AbortReturnsQuickly) {
    vcclResult_t rc;
    vcclComm_t c = make_comm(CommKind::UniqueId, &rc);
    ASSERT_ALL_RANKS_WHY(c != nullptr, rc_why("vcclCommInitRank", rc, vcclSuccess));
    vcclResult_t rc1;
    comm_sum(c, 1, &rc1); // the communicator has done some work
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = now_s();
    vcclResult_t ra = vcclCommAbort(c);
    double dt = now_s() - t0;
    EXPECT_ALL_RANKS(rc1 == vcclSuccess && ra == vcclSuccess && dt < 1.0)
        << "abort returned " << result_str(ra) << " after " << dt << " s";
    /* Abort on one rank only, while the others have not called anything: still quick. */
    vcclComm_t d = make_comm(CommKind::Mpi, &rc);
    ASSERT_ALL_RANKS_WHY(d != nullptr, rc_why("vcclCommInitMPI", rc, vcclSuccess));
    t0 = now_s();
    ra = rank_ == 0 ? vcclCommAbort(d) : vcclSuccess;
    dt = now_s() - t0;
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank_ != 0) {
        t0 = now_s();
        ra = vcclCommAbort(d);
        dt = std::max(dt, now_s() - t0);
    }
    EXPECT_ALL_RANKS(ra == vcclSuccess && dt < 1.0) << "abort took " << dt << " s";
}

TEST_F(CommTest, AsyncErrorIsSuccessOnHealthyComm) {
    for (CommKind kind : {CommKind::Mpi, CommKind::UniqueId}) {
        vcclComm_t c = shared_comm(kind);
        ASSERT_ALL_RANKS(c != nullptr);
        vcclResult_t rc1;
        comm_sum(c, 1, &rc1);
        vcclResult_t ae = vcclInternalError;
        vcclResult_t rc = vcclCommGetAsyncError(c, &ae);
        EXPECT_ALL_RANKS(rc1 == vcclSuccess && rc == vcclSuccess && ae == vcclSuccess)
            << comm_kind_name(kind) << ": rc " << result_str(rc) << " async " << result_str(ae);
    }
}

TEST_F(CommTest, InitRankConfigAndMpiConfigWork) {
    vcclConfig_t cfg = VCCL_CONFIG_INITIALIZER;
    cfg.commName = "test-comm-config";
    cfg.blocking = 1;
    vcclUniqueId id;
    memset(&id, 0, sizeof id);
    if (rank_ == 0) {
        EXPECT_EQ(vcclGetUniqueId(&id), vcclSuccess);
    }
    MPI_Bcast(&id, int(sizeof id), MPI_BYTE, 0, MPI_COMM_WORLD);
    vcclComm_t c = nullptr, d = nullptr;
    vcclResult_t rc = vcclCommInitRankConfig(&c, n_, id, rank_, &cfg);
    ASSERT_ALL_RANKS_WHY(rc == vcclSuccess && c != nullptr, rc_why("vcclCommInitRankConfig", rc, vcclSuccess));
    rc = vcclCommInitMPI(&d, MPI_COMM_WORLD, &cfg);
    ASSERT_ALL_RANKS_WHY(rc == vcclSuccess && d != nullptr, rc_why("vcclCommInitMPI(config)", rc, vcclSuccess));
    vcclResult_t rc1, rc2;
    int64_t s1 = comm_sum(c, 2, &rc1), s2 = comm_sum(d, 3, &rc2);
    EXPECT_ALL_RANKS(rc1 == vcclSuccess && rc2 == vcclSuccess && s1 == 2 * n_ && s2 == 3 * n_);
    EXPECT_ALL_RANKS(vcclCommDestroy(c) == vcclSuccess && vcclCommDestroy(d) == vcclSuccess);
}

/* As in NCCL, a child made with a NULL config inherits its parent's configuration; a config given wins. Telemetry
 * is the inherited setting the public API shows (vcclCommGetTelemetry refuses when it is off). */
TEST_F(CommTest, SplitAndShrinkWithoutConfigInheritTheParents) {
    vcclConfig_t off = VCCL_CONFIG_INITIALIZER;
    off.telemetry = 0;
    off.maxCtas = 3;
    vcclComm_t parent = nullptr;
    vcclResult_t rc = vcclCommInitMPI(&parent, MPI_COMM_WORLD, &off);
    ASSERT_ALL_RANKS_WHY(rc == vcclSuccess && parent != nullptr, rc_why("vcclCommInitMPI", rc, vcclSuccess));
    auto telemetry_state = [](vcclComm_t c) {
        int n = 0;
        return vcclCommGetTelemetry(c, nullptr, 0, &n);
    };
    vcclComm_t split = nullptr, shrunk = nullptr, split_on = nullptr;
    rc = vcclCommSplit(parent, 0, rank_, &split, nullptr);
    ASSERT_ALL_RANKS_WHY(rc == vcclSuccess && split != nullptr, rc_why("vcclCommSplit", rc, vcclSuccess));
    rc = vcclCommShrink(parent, nullptr, 0, &shrunk, nullptr, VCCL_SHRINK_DEFAULT);
    ASSERT_ALL_RANKS_WHY(rc == vcclSuccess && shrunk != nullptr, rc_why("vcclCommShrink", rc, vcclSuccess));
    vcclConfig_t on = VCCL_CONFIG_INITIALIZER;
    on.telemetry = 1;
    rc = vcclCommSplit(parent, 0, rank_, &split_on, &on);
    ASSERT_ALL_RANKS_WHY(rc == vcclSuccess && split_on != nullptr, rc_why("vcclCommSplit(config)", rc, vcclSuccess));
    EXPECT_ALL_RANKS_WHY(telemetry_state(parent) == vcclInvalidUsage, "the parent has telemetry off");
    EXPECT_ALL_RANKS_WHY(telemetry_state(split) == vcclInvalidUsage, "a split without config inherits telemetry off");
    EXPECT_ALL_RANKS_WHY(telemetry_state(shrunk) == vcclInvalidUsage, "a shrink without config inherits it");
    EXPECT_ALL_RANKS_WHY(telemetry_state(split_on) == vcclSuccess, "a split with telemetry=1 has it on");
    vcclResult_t rc1, rc2;
    int64_t s1 = comm_sum(split, 1, &rc1), s2 = comm_sum(shrunk, 2, &rc2);
    EXPECT_ALL_RANKS(rc1 == vcclSuccess && rc2 == vcclSuccess && s1 == n_ && s2 == 2 * n_);
    for (vcclComm_t c : {split_on, shrunk, split, parent}) EXPECT_EQ(vcclCommDestroy(c), vcclSuccess);
}

/* A monitoring thread reading snapshots while the communicator is destroyed: every call returns success or
 * vcclInvalidUsage (destroyed), never touches freed telemetry, the object destroy frees (the ASan stage of CI runs
 * this test, np2_comm.sh). */
TEST_F(CommTest, TelemetrySnapshotsWhileAnotherThreadDestroys) {
    /* 20 rounds on 2 ranks, fewer on more: every rank's reader spins, and CI's 2 cores are shared by all. */
    const int rounds = std::max(5, 40 / n_);
    for (int round = 0; round < rounds; ++round) {
        vcclComm_t comm = nullptr;
        ASSERT_ALL_RANKS(vcclCommInitMPI(&comm, MPI_COMM_WORLD, nullptr) == vcclSuccess);
        std::atomic<bool> stop{false};
        std::atomic<int> bad{0}, ok{0};
        std::thread reader([&] {
            std::vector<vcclTelemetryPeer> peers(16);
            while (!stop.load()) {
                int n = -1;
                vcclResult_t rc = vcclCommGetTelemetry(comm, peers.data(), int(peers.size()), &n);
                if (rc == vcclSuccess) {
                    ok++;
                } else if (rc != vcclInvalidUsage) {
                    bad++;
                }
            }
        });
        float in = 1.0f, out = 0.0f;
        bool sums = true;
        for (int i = 0; i < 50; ++i) {
            sums = sums && vcclAllReduce(&in, &out, 1, vcclFloat, vcclSum, comm, nullptr) == vcclSuccess &&
                   out == float(n_);
        }
        while (ok.load() == 0) std::this_thread::yield(); // destroy while it reads, not before
        EXPECT_ALL_RANKS(sums);
        EXPECT_ALL_RANKS(vcclCommDestroy(comm) == vcclSuccess);
        std::this_thread::sleep_for(std::chrono::milliseconds(2)); // reads of the destroyed communicator
        stop.store(true);
        reader.join();
        EXPECT_ALL_RANKS_WHY(bad.load() == 0, std::to_string(bad.load()) + " reads returned another error");
    }
}

TEST_F(CommTest, InitMpiOnSubCommunicator) {
    /* vcclCommInitMPI over an MPI sub-communicator (odd/even world ranks). */
    MPI_Comm sub;
    MPI_Comm_split(MPI_COMM_WORLD, rank_ % 2, n_ - rank_, &sub);
    int sub_rank = -1, sub_size = -1;
    MPI_Comm_rank(sub, &sub_rank);
    MPI_Comm_size(sub, &sub_size);
    vcclComm_t c = nullptr;
    vcclResult_t rc = vcclCommInitMPI(&c, sub, nullptr);
    ASSERT_ALL_RANKS_WHY(rc == vcclSuccess && c != nullptr, rc_why("vcclCommInitMPI(sub)", rc, vcclSuccess));
    int r = -1, count = -1;
    vcclCommUserRank(c, &r);
    vcclCommCount(c, &count);
    vcclResult_t rc1;
    int64_t s = comm_sum(c, rank_, &rc1);
    int64_t want = 0;
    for (int i = rank_ % 2; i < n_; i += 2) want += i;
    EXPECT_ALL_RANKS(r == sub_rank && count == sub_size && rc1 == vcclSuccess && s == want)
        << "rank " << r << "/" << sub_rank << " count " << count << "/" << sub_size << " sum " << s << "/" << want;
    EXPECT_ALL_RANKS(vcclCommDestroy(c) == vcclSuccess);
    MPI_Comm_free(&sub);
}

TEST_F(CommTest, GetVersion) {
    int v = -1;
    EXPECT_ALL_RANKS(vcclGetVersion(&v) == vcclSuccess && v == VCCL_VERSION_CODE) << "version " << v;
    EXPECT_ALL_RANKS(VCCL_VERSION_CODE == VCCL_MAJOR * 10000 + VCCL_MINOR * 100 + VCCL_PATCH);
    EXPECT_ALL_RANKS(vcclGetVersion(nullptr) == vcclInvalidArgument);
}

TEST_F(CommTest, ErrorStringsNonNullAndDistinct) {
    std::set<std::string> seen;
    bool ok = true;
    std::string why;
    for (int r = 0; r < vcclNumResults; ++r) {
        const char* s = vcclGetErrorString(vcclResult_t(r));
        if (s == nullptr || *s == '\0') {
            ok = false;
            why += "code " + std::to_string(r) + " has no string; ";
            continue;
        }
        if (!seen.insert(s).second) {
            ok = false;
            why += "code " + std::to_string(r) + " repeats \"" + s + "\"; ";
        }
    }
    const char* unknown = vcclGetErrorString(vcclResult_t(99));
    const char* negative = vcclGetErrorString(vcclResult_t(-1));
    ok &= unknown != nullptr && negative != nullptr;
    EXPECT_ALL_RANKS_WHY(ok, why);
}

TEST_F(CommTest, LastErrorDescribesFailure) {
    const char* before = vcclGetLastError(nullptr);
    vcclResult_t rc = vcclGetVersion(nullptr);
    const char* after = vcclGetLastError(nullptr);
    EXPECT_ALL_RANKS(before != nullptr && rc == vcclInvalidArgument && after != nullptr && *after != '\0')
        << "last error after a failed call: \"" << (after ? after : "(null)") << "\"";
}

TEST_F(CommTest, ManyCommunicatorsInALoop) {
    bool ok = true;
    std::string why;
    for (int i = 0; i < 20 && ok; ++i) {
        CommKind kind = (i % 4 == 3) ? CommKind::UniqueId : CommKind::Mpi;
        vcclResult_t rc;
        vcclComm_t c = make_comm(kind, &rc);
        if (c == nullptr) {
            ok = false;
            why = "iteration " + std::to_string(i) + ": " + rc_why("create", rc, vcclSuccess);
        } else {
            vcclResult_t rc1;
            int64_t s = comm_sum(c, i, &rc1);
            if (rc1 != vcclSuccess || s != int64_t(i) * n_) {
                ok = false;
                why = "iteration " + std::to_string(i) + ": sum " + std::to_string(s) + " " + rc_why("allreduce", rc1, vcclSuccess);
            }
            vcclResult_t rd = vcclCommDestroy(c);
            if (rd != vcclSuccess) {
                ok = false;
                why += rc_why("destroy", rd, vcclSuccess);
            }
        }
        ok = all_ranks_ok(ok); // stop together
    }
    EXPECT_ALL_RANKS_WHY(ok, why);
}

/* Found by the soak run (vccl-perf --soak): a rank that destroys a new communicator right away (no
 * operation, or only zero-count ones) freed its UCX worker while a slower peer was still connecting to it
 * (UCX: "shmat failed", vcclCommSplit returned vcclSystemError on the peer). Ranks are not synchronised
 * between iterations here on purpose. */
TEST_F(CommTest, SplitThenDestroyAtOnceInALoop) {
    vcclResult_t rc;
    vcclComm_t parent = make_comm(CommKind::Mpi, &rc);
    ASSERT_ALL_RANKS_WHY(parent != nullptr, rc_why("create", rc, vcclSuccess));
    std::string why;
    int failures = 0;
    const int rounds = n_ > 4 ? 16 : 40; // 8 ranks on CI's 2 cores: each split is a full connection setup
    for (int i = 0; i < rounds; ++i) {
        vcclComm_t child = nullptr;
        rc = vcclCommSplit(parent, 0, rank_, &child, nullptr);
        if (rc != vcclSuccess || child == nullptr) {
            if (failures++ == 0) why = "iteration " + std::to_string(i) + ": " + rc_why("vcclCommSplit", rc, vcclSuccess);
            continue;
        }
        rc = vcclCommDestroy(child);
        if (rc != vcclSuccess && failures++ == 0) why = rc_why("vcclCommDestroy", rc, vcclSuccess);
    }
    EXPECT_ALL_RANKS_WHY(failures == 0, why) << failures << " failures";
    EXPECT_EQ(vcclCommDestroy(parent), vcclSuccess);
}

TEST_F(CommTest, SeveralLiveCommunicatorsInterleaved) {
    /* Four communicators alive at once, used round-robin: each keeps its own collective sequence. */
    std::vector<vcclComm_t> comms;
    for (int i = 0; i < 4; ++i) {
        vcclResult_t rc;
        comms.push_back(make_comm(i % 2 ? CommKind::UniqueId : CommKind::Mpi, &rc));
        ASSERT_ALL_RANKS_WHY(comms.back() != nullptr, rc_why("create", rc, vcclSuccess));
    }
    bool ok = true;
    for (int round = 0; round < 5; ++round)
        for (size_t i = 0; i < comms.size(); ++i) {
            vcclResult_t rc;
            int64_t s = comm_sum(comms[i], int64_t(i * 100 + round), &rc);
            ok &= rc == vcclSuccess && s == int64_t(i * 100 + round) * n_;
        }
    EXPECT_ALL_RANKS(ok);
    for (vcclComm_t c : comms) EXPECT_ALL_RANKS(vcclCommDestroy(c) == vcclSuccess);
}

/* Polls vcclCommGetAsyncError until the creation is no longer in progress (at most `limit_s`); its last answer. */
vcclResult_t wait_created(vcclComm_t comm, double limit_s) {
    const double end = now_s() + limit_s;
    vcclResult_t state = vcclInProgress;
    while (true) {
        if (vcclCommGetAsyncError(comm, &state) != vcclSuccess) return vcclInternalError;
        if (state != vcclInProgress || now_s() > end) return state;
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
}

vcclUniqueId world_unique_id() {
    vcclUniqueId id;
    memset(&id, 0, sizeof id);
    if (world_rank() == 0 && vcclGetUniqueId(&id) != vcclSuccess) ADD_FAILURE() << vcclGetLastError(nullptr);
    MPI_Bcast(&id, int(sizeof id), MPI_BYTE, 0, MPI_COMM_WORLD);
    return id;
}

/* blocking = 0: init returns vcclInProgress before the other ranks have come, calls are refused until
 * vcclCommGetAsyncError says vcclSuccess; a split and a shrink made without a config are nonblocking too. */
TEST_F(CommTest, NonblockingInitSplitAndShrink) {
    vcclConfig_t cfg = VCCL_CONFIG_INITIALIZER;
    cfg.blocking = 0;
    const vcclUniqueId id = world_unique_id();
    vcclComm_t c = nullptr;
    vcclResult_t rc = vcclInternalError, early = vcclSuccess, early_async = vcclSuccess;
    // Rank 0 comes last: no other rank's creation can end before it has called.
    if (rank_ != 0) {
        rc = vcclCommInitRankConfig(&c, n_, id, rank_, &cfg);
        int64_t v = 1, out = 0;
        early = vcclAllReduce(&v, &out, 1, vcclInt64, vcclSum, c, nullptr);
        if (vcclCommGetAsyncError(c, &early_async) != vcclSuccess) early_async = vcclInternalError;
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank_ == 0) {
        rc = vcclCommInitRankConfig(&c, n_, id, rank_, &cfg);
        early = vcclInvalidUsage;
        early_async = vcclInProgress;
    }
    ASSERT_ALL_RANKS_WHY(rc == vcclInProgress && c != nullptr, rc_why("vcclCommInitRankConfig(blocking 0)", rc,
                                                                       vcclInProgress));
    EXPECT_ALL_RANKS(early == vcclInvalidUsage && early_async == vcclInProgress)
        << "before the last rank came: allreduce " << result_str(early) << ", async error " << result_str(early_async);
    vcclResult_t state = wait_created(c, 60.0);
    ASSERT_ALL_RANKS(state == vcclSuccess) << "creation ended with " << result_str(state);
    vcclResult_t rs;
    EXPECT_ALL_RANKS(comm_sum(c, rank_ + 1, &rs) == int64_t(n_) * (n_ + 1) / 2 && rs == vcclSuccess);

    vcclComm_t child = nullptr;
    rc = vcclCommSplit(c, rank_ % 2, -rank_, &child, nullptr);
    ASSERT_ALL_RANKS_WHY(rc == vcclInProgress && child != nullptr, rc_why("vcclCommSplit", rc, vcclInProgress));
    state = wait_created(child, 60.0);
    ASSERT_ALL_RANKS(state == vcclSuccess) << "split ended with " << result_str(state);
    int child_rank = -1, child_size = -1;
    EXPECT_ALL_RANKS(vcclCommUserRank(child, &child_rank) == vcclSuccess &&
                     vcclCommCount(child, &child_size) == vcclSuccess);
    const int same_color = (n_ + 1 - rank_ % 2) / 2;
    EXPECT_ALL_RANKS(child_size == same_color && child_rank == same_color - 1 - rank_ / 2)
        << "child rank " << child_rank << " of " << child_size;
    EXPECT_ALL_RANKS(comm_sum(child, 1, &rs) == same_color && rs == vcclSuccess);

    if (n_ >= 2) {
        int last = n_ - 1;
        vcclComm_t shrunk = nullptr;
        rc = rank_ == last ? vcclInProgress : vcclCommShrink(c, &last, 1, &shrunk, nullptr, VCCL_SHRINK_DEFAULT);
        state = rank_ == last ? vcclSuccess : shrunk != nullptr ? wait_created(shrunk, 60.0) : vcclInternalError;
        EXPECT_ALL_RANKS_WHY(rc == vcclInProgress && state == vcclSuccess, rc_why("vcclCommShrink", rc, vcclInProgress));
        vcclResult_t rsum = vcclSuccess;
        int64_t sum = n_ - 1;
        if (rank_ != last && state == vcclSuccess) sum = comm_sum(shrunk, 1, &rsum);
        EXPECT_ALL_RANKS(sum == n_ - 1 && rsum == vcclSuccess) << "sum " << sum;
        if (shrunk != nullptr) {
            EXPECT_EQ(vcclCommDestroy(shrunk), vcclSuccess);
        }
    }
    EXPECT_ALL_RANKS(vcclCommDestroy(child) == vcclSuccess && vcclCommDestroy(c) == vcclSuccess);
}

/* Over MPI a nonblocking creation calls MPI from vccl's thread, which needs MPI_THREAD_MULTIPLE: below it the
 * creation blocks and returns vcclSuccess. */
TEST_F(CommTest, NonblockingInitOverMpiBlocksBelowThreadMultiple) {
    int provided = MPI_THREAD_SINGLE;
    MPI_Query_thread(&provided);
    vcclConfig_t cfg = VCCL_CONFIG_INITIALIZER;
    cfg.blocking = 0;
    vcclComm_t d = nullptr;
    vcclResult_t rc = vcclCommInitMPI(&d, MPI_COMM_WORLD, &cfg);
    const vcclResult_t want = provided == MPI_THREAD_MULTIPLE ? vcclInProgress : vcclSuccess;
    ASSERT_ALL_RANKS_WHY(rc == want && d != nullptr, rc_why("vcclCommInitMPI(blocking 0)", rc, want));
    vcclResult_t state = wait_created(d, 60.0), rs = vcclInternalError;
    EXPECT_ALL_RANKS(state == vcclSuccess && comm_sum(d, 2, &rs) == 2 * n_ && rs == vcclSuccess)
        << "creation ended with " << result_str(state);
    EXPECT_ALL_RANKS(vcclCommDestroy(d) == vcclSuccess);
}

/* A rank that never comes: the creation stays in progress, and vcclCommAbort ends it within a second. */
TEST_F(CommTest, NonblockingInitAbortedWhileARankIsMissing) {
    vcclConfig_t cfg = VCCL_CONFIG_INITIALIZER;
    cfg.blocking = 0;
    const vcclUniqueId id = world_unique_id();
    vcclComm_t c = nullptr;
    vcclResult_t rc = vcclCommInitRankConfig(&c, n_ + 1, id, rank_, &cfg);
    ASSERT_ALL_RANKS_WHY(rc == vcclInProgress && c != nullptr, rc_why("vcclCommInitRankConfig", rc, vcclInProgress));
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    vcclResult_t state = vcclInternalError;
    EXPECT_ALL_RANKS(vcclCommGetAsyncError(c, &state) == vcclSuccess && state == vcclInProgress)
        << "async error " << result_str(state);
    int count = -1;
    vcclResult_t refused = vcclCommCount(c, &count);
    const std::string why = vcclGetLastError(nullptr);
    EXPECT_ALL_RANKS(refused == vcclInvalidUsage && why.find("still being created") != std::string::npos) << why;
    double t0 = now_s();
    vcclResult_t ra = vcclCommAbort(c);
    double dt = now_s() - t0;
    EXPECT_ALL_RANKS(ra == vcclSuccess && dt < 1.0) << "abort returned " << result_str(ra) << " after " << dt << " s";
    EXPECT_ALL_RANKS(vcclCommGetAsyncError(c, &state) == vcclInvalidUsage);
}

/* A creation that fails (the bootstrap root refuses a registration with another rank count) reports its error in
 * vcclCommGetAsyncError; the communicator then refuses calls and can be destroyed. Each rank on its own. */
TEST_F(CommTest, NonblockingCreationThatFailsReportsItsError) {
    vcclConfig_t cfg = VCCL_CONFIG_INITIALIZER;
    cfg.blocking = 0;
    vcclUniqueId own;
    ASSERT_EQ(vcclGetUniqueId(&own), vcclSuccess) << vcclGetLastError(nullptr);
    vcclComm_t a = nullptr, b = nullptr;
    vcclResult_t ra = vcclCommInitRankConfig(&a, 2, own, 0, &cfg);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    vcclResult_t rb = vcclCommInitRankConfig(&b, 3, own, 1, &cfg);
    ASSERT_TRUE(ra == vcclInProgress && rb == vcclInProgress) << result_str(ra) << " " << result_str(rb);
    // The root keeps the rank count it saw first: the other registration is refused.
    const double end = now_s() + 30.0;
    vcclResult_t sa = vcclInProgress, sb = vcclInProgress;
    while (sa == vcclInProgress && sb == vcclInProgress && now_s() < end) {
        vcclCommGetAsyncError(a, &sa);
        vcclCommGetAsyncError(b, &sb);
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    vcclComm_t failed = sb != vcclInProgress ? b : a, waiting = failed == b ? a : b;
    vcclResult_t failure = failed == b ? sb : sa;
    EXPECT_TRUE(failure != vcclInProgress && failure != vcclSuccess) << "creation ended with " << result_str(failure);
    int64_t v = 1, out = 0;
    vcclResult_t refused = vcclAllReduce(&v, &out, 1, vcclInt64, vcclSum, failed, nullptr);
    const std::string why = vcclGetLastError(nullptr);
    EXPECT_TRUE(refused == vcclInvalidUsage && why.find("failed") != std::string::npos) << result_str(refused) << ": " << why;
    EXPECT_EQ(vcclCommDestroy(failed), vcclSuccess);
    EXPECT_EQ(vcclCommAbort(waiting), vcclSuccess);
}

} // namespace
